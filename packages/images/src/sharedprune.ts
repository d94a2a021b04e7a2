import { renameSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { releaseLease, tryLease } from "./lease.js";
import type { ImageSettings } from "./settings.js";
import { type SharedEntry, listShared, nodeMarks, removeShared, sharedPaths, squashFile } from "./shared.js";

export type PruneResult = "removed" | `in use on ${string}` | "being pulled";

/**
 * Removes one image of the shared store unless a node has it mounted. Under the image's pull
 * lease, so no pull of it is under way; the squashfs is renamed away first and the nodes' marks
 * looked at again, as in the node cache: a node marks before it mounts, so one that marked after
 * the first look finds the file gone (its mount fails and it falls back), and one that marked
 * before the rename keeps the image.
 */
export function pruneSharedImage(root: string, entry: SharedEntry, who: string): PruneResult {
  const got = tryLease(join(sharedPaths(root).leases, entry.hex), who, 60_000);
  if (!("file" in got)) return "being pulled";
  try {
    const users = nodeMarks(root, entry.hex);
    if (users.length > 0) return `in use on ${users.join(", ")}`;
    const aside = join(sharedPaths(root).tmp, `${entry.hex}.removed.${process.pid}`);
    renameSync(squashFile(root, entry.hex), aside);
    const late = nodeMarks(root, entry.hex);
    if (late.length > 0) {
      renameSync(aside, squashFile(root, entry.hex));
      return `in use on ${late.join(", ")}`;
    }
    unlinkSync(aside);
    removeShared(root, entry.hex);
    return "removed";
  } finally {
    releaseLease(got);
  }
}

/**
 * Keeps the shared store under SharedStoreSize, least recently used first (every image with
 * `all`); an image in use anywhere stays. Calls `report` for each image it removed or kept.
 */
export function pruneShared(
  settings: ImageSettings,
  all: boolean,
  who: string,
  report: (entry: SharedEntry, result: PruneResult) => void,
): void {
  const root = settings.sharedStore as string;
  const entries = listShared(root);
  let total = entries.reduce((n, e) => n + e.size, 0);
  for (const e of entries) {
    if (!all && total <= settings.sharedStoreSize) return;
    const result = pruneSharedImage(root, e, who);
    if (result === "removed") total -= e.size;
    report(e, result);
  }
}
