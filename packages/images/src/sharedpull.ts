import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { NodeConf, PullProgress, StepRecord } from "@jobrt/core";
import { fetchSpec, reportedPull } from "./cache.js";
import { fetchImage } from "./fetch.js";
import { keepLease, releaseLease, tryLease } from "./lease.js";
import { makeDir, removeTree } from "@jobrt/host-services";
import type { ImageReference } from "./reference.js";
import { type ResolvedImage, imageError } from "./resolve.js";
import type { ImageSettings } from "./settings.js";
import { clearLeftovers, prepareSharedStore, publishShared, sharedMeta, sharedPaths, squashFile } from "./shared.js";
import type { ImageMeta } from "./store.js";
import { runTool, toolMessage } from "./tool.js";

const POLL_MS = 200;

/**
 * Makes sure the shared store holds the image's squashfs: pulled and converted once for the whole
 * cluster. Every node that finds it missing races for the image's lease; the winner pulls, unpacks
 * and converts in tmp/ and renames the result in; the others wait for it to appear, and take the
 * lease over when its holder died (lease.ts). Returns the squashfs file and whether it was there.
 */
export async function ensureShared(
  node: NodeConf,
  step: StepRecord,
  settings: ImageSettings,
  ref: ImageReference,
  resolved: ResolvedImage,
  progress?: (p: PullProgress) => void,
): Promise<{ file: string; cached: boolean }> {
  const root = settings.sharedStore as string;
  const hex = resolved.digest.slice("sha256:".length);
  prepareSharedStore(settings, root);
  const deadline = Date.now() + settings.pullTimeoutMs;
  let waited = false;
  for (;;) {
    if (sharedMeta(root, hex, true)) return { file: squashFile(root, hex), cached: true };
    const got = tryLease(join(sharedPaths(root).leases, hex), node.nodeName, settings.sharedLeaseMs);
    if ("file" in got) {
      const stop = keepLease(got, () =>
        node.log("warn", `images: the shared-store lease of ${hex} was taken over while this node converted it`),
      );
      try {
        if (sharedMeta(root, hex, true)) return { file: squashFile(root, hex), cached: true };
        node.log("verbose", `images: pulling ${ref.text} (${resolved.digest}) into the shared store ${root}`);
        clearLeftovers(root, hex);
        await convert(node, step, settings, ref, resolved, root, hex, progress);
        return { file: squashFile(root, hex), cached: false };
      } finally {
        stop();
        releaseLease(got);
      }
    }
    if (!waited && got.heldBy)
      node.log(
        "verbose",
        `images: ${ref.text} is being pulled into the shared store by ${got.heldBy.node} (pid ${got.heldBy.pid}); waiting`,
      );
    waited = true;
    if (Date.now() > deadline)
      throw imageError(
        ref,
        `the shared store's pull of ${resolved.digest} did not finish within ${settings.pullTimeoutMs / 1000} s (PullTimeout in images.conf)`,
      );
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** Pulls and unpacks into a private scratch store in tmp/, turns the bundle into one squashfs, publishes it. */
async function convert(
  node: NodeConf,
  step: StepRecord,
  settings: ImageSettings,
  ref: ImageReference,
  resolved: ResolvedImage,
  root: string,
  hex: string,
  progress?: (p: PullProgress) => void,
): Promise<void> {
  const scratch = join(
    sharedPaths(root).tmp,
    `${hex}.${node.nodeName}.${process.pid}.${randomBytes(4).toString("hex")}`,
  );
  makeDir(scratch, 0o700);
  try {
    const spec = fetchSpec(step, settings, ref, resolved, scratch, hex, "pull");
    await reportedPull(ref.text, progress, (onStderr) => fetchImage(spec, onStderr));
    const sqfs = `${scratch}.sqfs`;
    const r = await runTool(
      ["mksquashfs", join(scratch, hex), sqfs, "-noappend", "-quiet", "-no-progress", "-comp", "gzip"],
      { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C.UTF-8" }, timeoutMs: settings.pullTimeoutMs },
    );
    if (r.code !== 0) {
      removeTree(sqfs);
      throw imageError(ref, `mksquashfs failed: ${toolMessage(r)}`);
    }
    const meta = JSON.parse(readFileSync(join(scratch, hex, "image.json"), "utf8")) as ImageMeta;
    publishShared(root, hex, sqfs, meta);
  } finally {
    removeTree(scratch);
  }
}
