import { readFileSync, readdirSync, rmdirSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Lease, releaseLease, tryLease } from "./lease.js";
import { makeDir, makeDirs, readMountInfo } from "@jobrt/host-services";
import { addNodeMark, dropNodeMark, sharedStoreProblem } from "./shared.js";
import { HEX_RE, addMark, dropMark, liveMarks } from "./store.js";
import { runTool, toolMessage } from "./tool.js";

/**
 * A node's mounts of shared-store squashfs images (docs/images.md, "Mounts"): `<base>/mnt/<hex>`
 * is the image's bundle, mounted read-only once per node however many steps use it; each step
 * marks it in `<hex>.inuse/` (as in the node cache); the last step to go unmounts it, and `jobrt
 * gc` unmounts those whose steps all died. `<hex>.lease` serialises mount and unmount on the node.
 *
 * Root loop-mounts under `<CacheDir>/mnt` (base: CacheDir). A rootless jobrt mounts with
 * squashfuse under its own node-cache store (base: `<CacheDir>/users/<uid>`), where root never
 * looks: a user's FUSE daemon answers every lookup in its mount, and one that stops answering
 * would hang a root that stat()ed into it.
 */
export type MountKind = "loop" | "fuse";
export const mountRoot = (base: string) => join(base, "mnt");
const env = () => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C.UTF-8" });

const MOUNT: Record<MountKind, (file: string, dir: string) => string[]> = {
  loop: (file, dir) => ["mount", "-t", "squashfs", "-o", "ro,loop,nodev,nosuid", file, dir],
  fuse: (file, dir) => ["squashfuse", "-o", "ro,nodev,nosuid", file, dir],
};
const UNMOUNT: Record<MountKind, (dir: string) => string[]> = {
  loop: (dir) => ["umount", dir],
  fuse: (dir) => ["fusermount3", "-u", dir],
};

/**
 * A mount to reuse: any loop mount; a FUSE mount only while its daemon answers (one that died, a
 * SIGKILLed squashfuse, leaves a mount whose every access fails with ENOTCONN). Only the user who
 * made the FUSE mount looks into it.
 */
function usable(dir: string, kind: MountKind): boolean {
  if (!isMounted(dir)) return false;
  if (kind === "loop") return true;
  try {
    statSync(join(dir, "config.json"));
    return true;
  } catch {
    return false;
  }
}

/** Is `dir` a mount point now (this process's mount namespace)? */
export function isMounted(dir: string): boolean {
  return readMountInfo().some((m) => m.mountPoint === dir);
}

async function withMountLock<T>(base: string, hex: string, fn: () => Promise<T>): Promise<T> {
  let lease: Lease | undefined;
  for (let i = 0; !lease; i++) {
    const got = tryLease(join(mountRoot(base), `${hex}.lease`), "", 120_000);
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

/**
 * Marks the image in use by this step and mounts it unless mounted; returns the mount point (the
 * bundle). `from`, for a loop mount, is the store and node name whose cluster mark it makes (a
 * rootless jobrt cannot write the root-owned store, and squashfuse holds the file open).
 */
export async function mountShared(
  base: string,
  kind: MountKind,
  file: string,
  hex: string,
  mark: string,
  from?: { store: string; node: string },
): Promise<string> {
  if (kind === "loop") prepareLoopMounts(base);
  else makeDir(mountRoot(base), 0o700);
  const dir = join(mountRoot(base), hex);
  return withMountLock(base, hex, async () => {
    addMark(mountRoot(base), hex, mark, kind === "loop");
    if (usable(dir, kind)) return dir;
    try {
      if (isMounted(dir)) await unmount(dir, kind);
      // The cluster's mark first: a prune that then finds the image gone makes the mount fail.
      if (from) {
        writeFileSync(fromFile(base, hex), `${JSON.stringify(from)}\n`, { mode: 0o644 });
        addNodeMark(from.store, hex, from.node);
      }
      makeDir(dir, kind === "loop" ? 0o755 : 0o700);
      const argv = MOUNT[kind](file, dir);
      const r = await runTool(argv, { env: env(), timeoutMs: 60_000 });
      if (r.code !== 0) throw new Error(`${argv[0]} ${file} failed: ${toolMessage(r)}`);
      return dir;
    } catch (error) {
      dropMark(mountRoot(base), hex, mark);
      await unmountIfUnused(base, kind, hex);
      throw error;
    }
  });
}

/** Makes the dirs a loop mount lives in: CacheDir with its missing parents and mnt/, each 0755. */
function prepareLoopMounts(cacheDir: string): void {
  // Whatever the umask: a job user's runc enters the mount (a node whose CacheDir was not there yet
  // fell back to pulling into its node cache).
  makeDirs(cacheDir, 0o755);
  makeDir(cacheDir, 0o755);
  makeDir(mountRoot(cacheDir), 0o755);
}

async function unmount(dir: string, kind: MountKind): Promise<string | undefined> {
  const argv = UNMOUNT[kind](dir);
  const r = await runTool(argv, { env: env(), timeoutMs: 60_000 });
  return r.code === 0 ? undefined : `${argv.join(" ")} failed: ${toolMessage(r)}`;
}

/** Where a mount came from (`<hex>.from`): the store and node name whose cluster mark it made. */
const fromFile = (base: string, hex: string) => join(mountRoot(base), `${hex}.from`);

function readFrom(base: string, hex: string): { store: string; node: string } | undefined {
  try {
    const f = JSON.parse(readFileSync(fromFile(base, hex), "utf8")) as { store?: unknown; node?: unknown };
    unlinkSync(fromFile(base, hex));
    return typeof f.store === "string" && typeof f.node === "string" && sharedStoreProblem(f.store) === undefined
      ? { store: f.store, node: f.node }
      : undefined;
  } catch {
    return undefined;
  }
}

/** Unmounts when no live step uses the image; the caller holds the mount lock. */
async function unmountIfUnused(base: string, kind: MountKind, hex: string): Promise<"in use" | "unmounted" | string> {
  if (liveMarks(mountRoot(base), hex).length > 0) return "in use";
  const dir = join(mountRoot(base), hex);
  if (isMounted(dir)) {
    const problem = await unmount(dir, kind);
    if (problem) return problem;
  }
  const from = readFrom(base, hex);
  if (from) dropNodeMark(from.store, hex, from.node);
  for (const d of [join(mountRoot(base), `${hex}.inuse`), dir]) {
    try {
      for (const n of d.endsWith(".inuse") ? readdirSync(d) : []) dropMark(mountRoot(base), hex, n);
      rmdirSync(d);
    } catch {
      // gone, or a new mark came
    }
  }
  return "unmounted";
}

/** Gives back a step's use of a mounted image; the last one unmounts it. Returns a problem, if any. */
export function releaseMount(base: string, kind: MountKind, hex: string, mark: string): Promise<string | undefined> {
  return withMountLock(base, hex, async () => {
    dropMark(mountRoot(base), hex, mark);
    const r = await unmountIfUnused(base, kind, hex);
    return r === "in use" || r === "unmounted" ? undefined : r;
  });
}

/** `jobrt gc`: unmounts every image of the node whose steps are all gone. Returns what it did, per image. */
export async function collectMounts(
  base: string,
  kind: MountKind,
): Promise<{ hex: string; result: "in use" | "unmounted" | string }[]> {
  let names: string[];
  try {
    names = readdirSync(mountRoot(base)).filter((n) => HEX_RE.test(n));
  } catch {
    return [];
  }
  const done: { hex: string; result: string }[] = [];
  for (const hex of names)
    done.push({ hex, result: await withMountLock(base, hex, () => unmountIfUnused(base, kind, hex)) });
  return done;
}
