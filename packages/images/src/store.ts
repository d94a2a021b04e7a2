import {
  closeSync,
  constants,
  fstatSync,
  futimesSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  rmdirSync,
  unlinkSync,
} from "node:fs";
import { join } from "node:path";
import { procStat } from "@jobrt/host-services";

/**
 * The node-local image cache (docs/runtime-oci.md, "Image cache"):
 *
 *   <CacheDir>/public/            root, 0755: images anyone may pull, pulled anonymously by root
 *   <CacheDir>/users/<uid>/       the user, 0700: images pulled with that user's credentials
 *
 * Each of these is a store. In a store, `<hex>/` (hex of the image manifest's sha256 digest) is one
 * unpacked image: `rootfs/`, the prepared `config.json` and `image.json` (what was pulled, when,
 * its size; its mtime is the last use). `<hex>.lock` serialises pulling, unpacking and removing that
 * image; `<hex>.inuse/` holds one mark per running step that uses it; `.tmp/` holds pulls in
 * progress. A store is only ever written by its owner.
 */
export const HEX_RE = /^[0-9a-f]{64}$/;

export interface ImageMeta {
  reference: string;
  digest: string;
  /** Bytes on disk of the unpacked image. */
  size: number;
  pulledAt: string;
  /** The image config's Entrypoint, put before the task's argv (its Cmd is replaced by it). */
  entrypoint: string[];
  public: boolean;
}

export interface StoreEntry {
  store: string;
  hex: string;
  dir: string;
  meta: ImageMeta;
  /** Last use (ms since the epoch). */
  lastUsed: number;
  /** Marks of running steps whose process is still alive. */
  users: string[];
}

export const publicStore = (cacheDir: string) => join(cacheDir, "public");
export const userStore = (cacheDir: string, uid: number) => join(cacheDir, "users", String(uid));
export const lockFile = (store: string, hex: string) => join(store, `${hex}.lock`);
export const inUseDir = (store: string, hex: string) => join(store, `${hex}.inuse`);

/** A step's in-use mark: the host's pid and start time (so a recycled pid is not taken for it). */
export function markName(jobId: number, stepId: number, pid = process.pid): string {
  return `${pid}.${procStat(pid)?.startTime ?? 0}.${jobId}.${stepId}`;
}

/** Is the process that left this mark still running? */
export function markAlive(name: string): boolean {
  const [pid, start] = name.split(".").map(Number);
  if (!pid || !Number.isInteger(pid)) return false;
  const s = procStat(pid);
  return s !== undefined && s.state !== "Z" && s.startTime === start;
}

/** The live marks of one image (dead ones are ignored: their step's host is gone). */
export function liveMarks(store: string, hex: string): string[] {
  try {
    return readdirSync(inUseDir(store, hex)).filter(markAlive);
  } catch {
    return [];
  }
}

/** Every store under the cache dir (public, then each user's). */
export function listStores(cacheDir: string): string[] {
  const stores: string[] = [];
  if (isDir(publicStore(cacheDir))) stores.push(publicStore(cacheDir));
  try {
    for (const u of readdirSync(join(cacheDir, "users")))
      if (/^[0-9]+$/.test(u) && isDir(userStore(cacheDir, Number(u)))) stores.push(userStore(cacheDir, Number(u)));
  } catch {
    // no user stores yet
  }
  return stores;
}

function isDir(p: string): boolean {
  try {
    return lstatSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** The complete images of a store (a pull in progress is not one); unreadable stores list nothing. */
export function listEntries(store: string): StoreEntry[] {
  let names: string[];
  try {
    names = readdirSync(store);
  } catch {
    return [];
  }
  const entries: StoreEntry[] = [];
  for (const hex of names) {
    if (!HEX_RE.test(hex)) continue;
    const dir = join(store, hex);
    try {
      const { text, mtimeMs } = readMeta(join(dir, "image.json"), false);
      entries.push({
        store,
        hex,
        dir,
        meta: JSON.parse(text) as ImageMeta,
        lastUsed: mtimeMs,
        users: liveMarks(store, hex),
      });
    } catch {
      // half-removed or foreign: not an image
    }
  }
  return entries;
}

/**
 * Marks an image in use by a step. Marking needs no lock: a remover renames the image away and
 * then looks for marks again, putting it back when one appeared (see helper.ts), so an image that
 * a step saw after marking it stays. A release may remove the empty mark dir meanwhile: retried.
 */
export function addMark(store: string, hex: string, mark: string, shared: boolean): void {
  const dir = inUseDir(store, hex);
  for (let attempt = 0; ; attempt++) {
    try {
      mkdirSync(dir, { recursive: true, mode: shared ? 0o755 : 0o700 });
      closeSync(openSync(join(dir, mark), "w", 0o644));
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT" || attempt >= 5) throw error;
    }
  }
}

/** Removes a step's mark, and the mark dir once empty. Never throws. */
export function dropMark(store: string, hex: string, mark: string): void {
  const dir = inUseDir(store, hex);
  try {
    unlinkSync(join(dir, mark));
  } catch {
    // already gone
  }
  try {
    rmdirSync(dir);
  } catch {
    // other marks, or gone
  }
}

/** The image's metadata when it is complete in the store, with its last use set to now. */
export function useIfPresent(store: string, hex: string): ImageMeta | undefined {
  try {
    return JSON.parse(readMeta(join(store, hex, "image.json"), true).text) as ImageMeta;
  } catch {
    return undefined;
  }
}

/**
 * Reads an image.json that its store's owner could have replaced (root lists and evicts every
 * user's store): never through a symlink, never blocking on a FIFO, only a small regular file.
 */
function readMeta(file: string, touch: boolean): { text: string; mtimeMs: number } {
  const fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > 1 << 20) throw new Error(`${file} is not a small regular file`);
    const text = readFileSync(fd, "utf8");
    if (touch) {
      const now = new Date();
      futimesSync(fd, now, now);
    }
    return { text, mtimeMs: touch ? Date.now() : st.mtimeMs };
  } finally {
    closeSync(fd);
  }
}
