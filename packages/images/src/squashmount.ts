import { readFileSync, readdirSync, rmdirSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Lease, releaseLease, tryLease } from "./lease.js";
import { makeDir, makeDirs, readMountInfo } from "@jobrt/host-services";
import { addNodeMark, dropNodeMark, sharedStoreProblem } from "./shared.js";
import { HEX_RE, addMark, dropMark, liveMarks } from "./store.js";
import { runTool, toolMessage } from "./tool.js";

/**
 * A node's mounts of shared-store squashfs images (docs/images.md, "Mounts"): `<CacheDir>/mnt/<hex>`
 * is the image's bundle, mounted read-only once per node however many steps use it; each step
 * marks it in `<hex>.inuse/` (as in the node cache); the last step to go unmounts it, and `jobrt
 * gc` unmounts those whose steps all died. `<hex>.lease` serialises mount and unmount on the node.
 */
export const mountRoot = (cacheDir: string) => join(cacheDir, "mnt");
const env = () => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C.UTF-8" });

/** Is `dir` a mount point now (this process's mount namespace)? */
export function isMounted(dir: string): boolean {
  return readMountInfo().some((m) => m.mountPoint === dir);
}

async function withMountLock<T>(cacheDir: string, hex: string, fn: () => Promise<T>): Promise<T> {
  let lease: Lease | undefined;
  for (let i = 0; !lease; i++) {
    const got = tryLease(join(mountRoot(cacheDir), `${hex}.lease`), "", 120_000);
    if ("file" in got) lease = got;
    else if (i > 3000) throw new Error(`cannot lock the mount of ${hex}: held by pid ${got.heldBy?.pid}`);
    else await new Promise((r) => setTimeout(r, 20));
  }
  try {
    return await fn();
  } finally {
    releaseLease(lease);
  }
}

/** Marks the image in use by this step and mounts it unless mounted; returns the mount point (the bundle). */
export async function mountShared(
  cacheDir: string,
  file: string,
  hex: string,
  mark: string,
  from: { store: string; node: string },
): Promise<string> {
  // CacheDir with its missing parents, each 0755 whatever the umask (a job user's runc enters the
  // mount): a node whose CacheDir was not there yet fell back to pulling into its node cache.
  makeDirs(cacheDir, 0o755);
  makeDir(cacheDir, 0o755);
  makeDir(mountRoot(cacheDir), 0o755);
  const dir = join(mountRoot(cacheDir), hex);
  return withMountLock(cacheDir, hex, async () => {
    addMark(mountRoot(cacheDir), hex, mark, true);
    if (isMounted(dir)) return dir;
    try {
      // The cluster's mark first: a prune that then finds the image gone makes the mount fail.
      writeFileSync(fromFile(cacheDir, hex), `${JSON.stringify(from)}\n`, { mode: 0o644 });
      addNodeMark(from.store, hex, from.node);
      makeDir(dir, 0o755);
      const r = await runTool(["mount", "-t", "squashfs", "-o", "ro,loop,nodev,nosuid", file, dir], {
        env: env(),
        timeoutMs: 60_000,
      });
      if (r.code !== 0) throw new Error(`mount -t squashfs ${file} failed: ${toolMessage(r)}`);
      return dir;
    } catch (error) {
      dropMark(mountRoot(cacheDir), hex, mark);
      await unmountIfUnused(cacheDir, hex);
      throw error;
    }
  });
}

/** Where a mount came from (`<hex>.from`): the store and node name whose cluster mark it made. */
const fromFile = (cacheDir: string, hex: string) => join(mountRoot(cacheDir), `${hex}.from`);

function readFrom(cacheDir: string, hex: string): { store: string; node: string } | undefined {
  try {
    const f = JSON.parse(readFileSync(fromFile(cacheDir, hex), "utf8")) as { store?: unknown; node?: unknown };
    unlinkSync(fromFile(cacheDir, hex));
    return typeof f.store === "string" && typeof f.node === "string" && sharedStoreProblem(f.store) === undefined
      ? { store: f.store, node: f.node }
      : undefined;
  } catch {
    return undefined;
  }
}

/** Unmounts when no live step uses the image; the caller holds the mount lock. */
async function unmountIfUnused(cacheDir: string, hex: string): Promise<"in use" | "unmounted" | string> {
  if (liveMarks(mountRoot(cacheDir), hex).length > 0) return "in use";
  const dir = join(mountRoot(cacheDir), hex);
  if (isMounted(dir)) {
    const r = await runTool(["umount", dir], { env: env(), timeoutMs: 60_000 });
    if (r.code !== 0) return `umount ${dir} failed: ${toolMessage(r)}`;
  }
  const from = readFrom(cacheDir, hex);
  if (from) dropNodeMark(from.store, hex, from.node);
  for (const d of [join(mountRoot(cacheDir), `${hex}.inuse`), dir]) {
    try {
      for (const n of d.endsWith(".inuse") ? readdirSync(d) : []) dropMark(mountRoot(cacheDir), hex, n);
      rmdirSync(d);
    } catch {
      // gone, or a new mark came
    }
  }
  return "unmounted";
}

/** Gives back a step's use of a mounted image; the last one unmounts it. Returns a problem, if any. */
export function releaseMount(cacheDir: string, hex: string, mark: string): Promise<string | undefined> {
  return withMountLock(cacheDir, hex, async () => {
    dropMark(mountRoot(cacheDir), hex, mark);
    const r = await unmountIfUnused(cacheDir, hex);
    return r === "in use" || r === "unmounted" ? undefined : r;
  });
}

/** `jobrt gc`: unmounts every image of the node whose steps are all gone. Returns what it did, per image. */
export async function collectMounts(
  cacheDir: string,
): Promise<{ hex: string; result: "in use" | "unmounted" | string }[]> {
  let names: string[];
  try {
    names = readdirSync(mountRoot(cacheDir)).filter((n) => HEX_RE.test(n));
  } catch {
    return [];
  }
  const done: { hex: string; result: string }[] = [];
  for (const hex of names)
    done.push({ hex, result: await withMountLock(cacheDir, hex, () => unmountIfUnused(cacheDir, hex)) });
  return done;
}
