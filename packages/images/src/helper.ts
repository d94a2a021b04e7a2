import { mkdirSync, readdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { removeTree } from "@jobrt/host-services";
import { type FetchSpec, fetchImage } from "./fetch.js";
import { dropMark, inUseDir, liveMarks } from "./store.js";

export type HelperRequest =
  | { op: "fetch"; spec: FetchSpec }
  | { op: "release"; store: string; hex: string; mark: string }
  | { op: "remove"; store: string; hex: string };

export type HelperResponse =
  | { ok: true; cached?: boolean; size?: number; removed?: boolean; inUse?: string[] }
  | { ok: false; error: string; staleLock?: true };

/** The helper program (dist/helpermain.js), from either src/ (tests) or dist/. */
export const IMAGE_HELPER = fileURLToPath(new URL("../dist/helpermain.js", import.meta.url));

export async function handle(r: HelperRequest, report?: (line: string) => void): Promise<HelperResponse> {
  switch (r.op) {
    case "fetch":
      return { ok: true, ...(await fetchImage(r.spec, report)) };
    case "release":
      dropMark(r.store, r.hex, r.mark);
      return { ok: true };
    case "remove":
      return removeImage(r.store, r.hex);
  }
}

/** Removes one image unless a running step uses it. Renamed away first, so it vanishes at once. */
function removeImage(store: string, hex: string): HelperResponse {
  const inUse = liveMarks(store, hex);
  if (inUse.length > 0) return { ok: true, removed: false, inUse };
  const tmpRoot = join(store, ".tmp");
  mkdirSync(tmpRoot, { recursive: true, mode: 0o700 });
  const doomed = join(tmpRoot, `${hex}.removed.${process.pid}`);
  try {
    renameSync(join(store, hex), doomed);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  // A step may have marked the image (without the lock) after the first look and seen it before
  // the rename: it keeps it. A step marking after this look finds it gone and pulls it again.
  const late = liveMarks(store, hex);
  if (late.length > 0) {
    renameSync(doomed, join(store, hex));
    return { ok: true, removed: false, inUse: late };
  }
  const left = [...removeTree(doomed), ...removeTree(inUseDir(store, hex))];
  if (left.length > 0) return { ok: false, error: `could not remove: ${left.join("; ")}` };
  try {
    // Leftovers of pulls whose helper was killed (never those of a running pull: we hold the lock).
    for (const n of readdirSync(tmpRoot)) if (n.startsWith(`${hex}.`)) removeTree(join(tmpRoot, n));
  } catch {
    // nothing there
  }
  return { ok: true, removed: true };
}
