import {
  chmodSync,
  closeSync,
  constants,
  fstatSync,
  futimesSync,
  lstatSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmdirSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { type JobrtError, jobrtError, messageOf } from "@jobrt/core";
import { makeDir, othersMayReplace, removeTree } from "@jobrt/host-services";
import type { ImageSettings } from "./settings.js";
import { type ImageMeta, HEX_RE } from "./store.js";

/**
 * The cluster's image store (images.conf SharedStore, docs/images.md), on a filesystem every node
 * sees:
 *
 *   <SharedStore>/images/<hex>.sqfs   one squashfs per image digest: config.json, image.json, rootfs/
 *   <SharedStore>/images/<hex>.json   its ImageMeta; its mtime is the last use
 *   <SharedStore>/leases/<hex>        the pull lease (lease.ts)
 *   <SharedStore>/tmp/                pulls and conversions in progress, named <hex>.<node>.<pid>...
 *   <SharedStore>/jobs/<cluster>/     one digest per job step and reference (jobpin.ts)
 *
 * Only root writes it, and only public images go in it: a private image (pulled with a user's
 * credentials) stays in that user's node cache.
 */
export const sharedPaths = (root: string) => ({
  images: join(root, "images"),
  leases: join(root, "leases"),
  tmp: join(root, "tmp"),
  jobs: join(root, "jobs"),
});
export const squashFile = (root: string, hex: string) => join(root, "images", `${hex}.sqfs`);
export const sharedMetaFile = (root: string, hex: string) => join(root, "images", `${hex}.json`);

/**
 * Root never follows a path a job user controls: the store and every dir above it must be real
 * directories (no symlink) owned by root and writable by nobody else. Returns the problem, if any.
 */
export function sharedStoreProblem(root: string): string | undefined {
  const parts = root.split("/").filter((p) => p !== "");
  let path = "";
  for (const p of ["", ...parts]) {
    path = p === "" ? "/" : join(path, p);
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(path);
    } catch (error) {
      return `SharedStore ${root}: cannot use ${path}: ${(error as Error).message}`;
    }
    if (st.isSymbolicLink()) return `SharedStore ${root}: ${path} is a symbolic link`;
    if (!st.isDirectory()) return `SharedStore ${root}: ${path} is not a directory`;
    if (st.uid !== 0) return `SharedStore ${root}: ${path} belongs to uid ${st.uid}, not root`;
    // A sticky /tmp is fine above the store: nobody else may rename or remove root's entry in it.
    // The store itself must be root's alone, sticky or not: anyone could make its images/, leases/,
    // tmp/ or jobs/ before root does.
    if (path === root ? (st.mode & 0o022) !== 0 : othersMayReplace(st))
      return `SharedStore ${root}: ${path} is writable by others than root`;
  }
  return undefined;
}

/** A store problem as one line naming images.conf's SharedStore (ERR_CONF). */
export function sharedStoreError(settings: ImageSettings, problem: string): JobrtError {
  return jobrtError(
    "ERR_CONF",
    {
      where: settings.file ?? "images.conf",
      problem: `${problem}: root does not use a store a job user could redirect`,
    },
    { details: { key: "SharedStore" } },
  );
}

/**
 * Creates the store's own dirs (root, 0755; tmp 0700). One that is not a real dir of root's (a
 * symlink, a user's) is refused as sharedStoreProblem refuses the store, before anything is
 * written through it.
 */
export function prepareSharedStore(settings: ImageSettings, root: string): void {
  const p = sharedPaths(root);
  for (const [dir, mode] of [
    [p.images, 0o755],
    [p.leases, 0o755],
    [p.tmp, 0o700],
    [p.jobs, 0o755],
  ] as const) {
    try {
      makeDir(dir, mode);
    } catch (error) {
      throw sharedStoreError(settings, `SharedStore ${root}: ${sharedDirProblem(dir, error)}`);
    }
  }
}

function sharedDirProblem(dir: string, error: unknown): string {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(dir);
  } catch {
    return `cannot make ${dir}: ${messageOf(error)}`;
  }
  if (st.isSymbolicLink()) return `${dir} is a symbolic link`;
  if (!st.isDirectory()) return `${dir} is not a directory`;
  if (st.uid !== 0) return `${dir} belongs to uid ${st.uid}, not root`;
  return `cannot use ${dir}: ${messageOf(error)}`;
}

/** The image's metadata when its squashfs is complete in the store; `touch` sets its last use to now. */
export function sharedMeta(root: string, hex: string, touch: boolean): ImageMeta | undefined {
  try {
    lstatSync(squashFile(root, hex));
    const fd = openSync(sharedMetaFile(root, hex), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      if (!fstatSync(fd).isFile()) return undefined;
      const meta = JSON.parse(readFileSync(fd, "utf8")) as ImageMeta;
      if (touch) futimesSync(fd, new Date(), new Date());
      return meta;
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
}

/**
 * Puts a converted image into the store: the metadata first, then the squashfs by one rename, so
 * the image is there whole or not at all (a complete image is a .sqfs with its .json).
 */
export function publishShared(root: string, hex: string, sqfs: string, meta: ImageMeta): void {
  const tmpMeta = `${sqfs}.json`;
  writeFileSync(tmpMeta, `${JSON.stringify(meta, null, 2)}\n`, { mode: 0o644 });
  renameSync(tmpMeta, sharedMetaFile(root, hex));
  // Readable by every user whatever root's umask: a rootless jobrt mounts it with squashfuse.
  chmodSync(sqfs, 0o644);
  renameSync(sqfs, squashFile(root, hex));
}

export interface SharedEntry {
  hex: string;
  file: string;
  meta: ImageMeta;
  /** Bytes of the squashfs file. */
  size: number;
  lastUsed: number;
}

/** The complete images of the shared store, least recently used first. */
export function listShared(root: string): SharedEntry[] {
  let names: string[];
  try {
    names = readdirSync(sharedPaths(root).images);
  } catch {
    return [];
  }
  const out: SharedEntry[] = [];
  for (const n of names) {
    const hex = n.slice(0, -".sqfs".length);
    if (!n.endsWith(".sqfs") || !HEX_RE.test(hex)) continue;
    const meta = sharedMeta(root, hex, false);
    if (!meta) continue;
    try {
      out.push({
        hex,
        file: squashFile(root, hex),
        meta,
        size: lstatSync(squashFile(root, hex)).size,
        lastUsed: statSync(sharedMetaFile(root, hex)).mtimeMs,
      });
    } catch {
      // removed meanwhile
    }
  }
  return out.sort((a, b) => a.lastUsed - b.lastUsed);
}

/** Removes one image from the store (the squashfs first, so it stops being complete at once). */
export function removeShared(root: string, hex: string): void {
  for (const f of [squashFile(root, hex), sharedMetaFile(root, hex)]) {
    try {
      unlinkSync(f);
    } catch {
      // gone
    }
  }
}

/** What pulls of this image on `node` left in tmp/ (their holder is dead: we hold the lease now). */
export function clearLeftovers(root: string, hex: string): void {
  try {
    for (const n of readdirSync(sharedPaths(root).tmp))
      if (n.startsWith(`${hex}.`)) removeTree(join(sharedPaths(root).tmp, n));
  } catch {
    // no tmp yet
  }
}

/**
 * Which nodes have the image mounted: `inuse/<hex>/<NodeName>`, made before a node mounts it and
 * removed after it unmounted (squashmount.ts), so a prune on any node sees an image in use
 * anywhere. A node that died with it mounted leaves its mark until `jobrt gc` runs there.
 */
const nodeMarkDir = (root: string, hex: string) => join(root, "inuse", hex);

export function addNodeMark(root: string, hex: string, nodeName: string): void {
  makeDir(join(root, "inuse"), 0o755);
  makeDir(nodeMarkDir(root, hex), 0o755);
  writeFileSync(join(nodeMarkDir(root, hex), nodeName), "", { mode: 0o644 });
}

export function dropNodeMark(root: string, hex: string, nodeName: string): void {
  try {
    unlinkSync(join(nodeMarkDir(root, hex), nodeName));
    rmdirSync(nodeMarkDir(root, hex));
  } catch {
    // gone, or other nodes' marks
  }
}

export function nodeMarks(root: string, hex: string): string[] {
  try {
    return readdirSync(nodeMarkDir(root, hex));
  } catch {
    return [];
  }
}
