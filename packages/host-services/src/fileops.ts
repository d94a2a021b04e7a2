import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fstatSync,
  fsyncSync,
  openSync,
  readSync,
  renameSync,
  rmdirSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { type FileUser, asUser } from "./asuser.js";
import { makeDir } from "./makedir.js";
import { removeTree } from "./removetree.js";

/**
 * File work on what a job user controls (a runtime's step spool dir, a bundle): every operation
 * refuses to follow a symlink in the last path component, and with a user given it runs with that
 * user's effective ids (asUser), so even a symlink swapped into a parent component only reaches what
 * the user could touch anyway (docs/reliability.md, "Threat model"). In this process: no helper
 * process per call (docs/decisions.md, "File work as the job user, in process").
 */

export type FileOp =
  | { op: "read"; path: string }
  | { op: "mkdir"; path: string; mode: number }
  | { op: "write"; dir: string; name: string; content: string; mode: number }
  | { op: "remove"; path: string }
  | { op: "rmdir"; path: string };

export type FileOpResult = { ok: true; value?: string | string[] } | { ok: false; error: string; code?: string };

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException)?.code;
}

/**
 * Writes `dir/name` atomically: a fresh temp file (O_EXCL, so never through a symlink), fsync,
 * then rename over the target. Leftovers from an earlier run are simply replaced (runtime-oci.md W9).
 */
export function writeAtomic(
  dir: string,
  name: string,
  content: string,
  mode: number,
  owner?: { uid: number; gid: number },
): void {
  // O_EXCL makes a name clash an error, never a write through someone else's file, so the name
  // needs no cryptographic randomness (and the supervisor saves loading node:crypto).
  const tmp = join(
    dir,
    `.${name}.${process.pid}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}.tmp`,
  );
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    const buf = Buffer.from(content, "utf8");
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
    if (owner) fchownSync(fd, owner.uid, owner.gid);
    fchmodSync(fd, mode);
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    try {
      unlinkSync(tmp);
    } catch {
      // the temp file is ours; nothing else to do if it is already gone
    }
    throw error;
  }
  closeSync(fd);
  try {
    renameSync(tmp, join(dir, name));
  } catch (error) {
    try {
      unlinkSync(tmp);
    } catch {
      // see above
    }
    throw error;
  }
}

/**
 * Reads a regular file without following a symlink and without blocking (a FIFO opens at once with
 * O_NONBLOCK, then is refused as not a regular file); undefined when it does not exist. A file over
 * `max` bytes is refused, not read: a job user's file must not make root read or allocate gigabytes
 * (docs/reliability.md, "Threat model").
 */
export function readNoFollow(path: string, max = 64 * 1024): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return undefined;
    throw error;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw Object.assign(new Error(`${path} is not a regular file`), { code: "ENOTREG" });
    if (st.size > max)
      throw Object.assign(new Error(`${path} is ${st.size} bytes, more than the ${max}-byte limit`), { code: "EFBIG" });
    const buf = Buffer.alloc(st.size);
    const n = readSync(fd, buf, 0, st.size, 0);
    return buf.subarray(0, n).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

/** The largest file a read op takes: a bundle's config.json is the largest a runtime reads. */
const READ_OP_MAX_BYTES = 16 * 1024 * 1024;

function readOp(path: string): FileOpResult {
  const text = readNoFollow(path, READ_OP_MAX_BYTES);
  if (text === undefined)
    return { ok: false, error: `ENOENT: no such file or directory, open '${path}'`, code: "ENOENT" };
  return { ok: true, value: text };
}

/** rmdir that treats "already gone" as success; false when the dir is not empty. */
export function removeEmptyDir(path: string): boolean {
  try {
    rmdirSync(path);
    return true;
  } catch (error) {
    const code = errnoOf(error);
    if (code === "ENOENT") return true;
    if (code === "ENOTEMPTY" || code === "EEXIST") return false;
    throw error;
  }
}

export function applyFileOp(op: FileOp): FileOpResult {
  try {
    switch (op.op) {
      case "read":
        return readOp(op.path);
      case "mkdir":
        makeDir(op.path, op.mode);
        return { ok: true };
      case "write":
        writeAtomic(op.dir, op.name, op.content, op.mode);
        return { ok: true };
      case "remove":
        return { ok: true, value: removeTree(op.path) };
      case "rmdir":
        return removeEmptyDir(op.path)
          ? { ok: true }
          : { ok: false, error: `${op.path}: directory not empty`, code: "ENOTEMPTY" };
    }
  } catch (error) {
    const code = errnoOf(error);
    return { ok: false, error: (error as Error).message, ...(code ? { code } : {}) };
  }
}

/**
 * Runs the operations in order, with `user`'s effective ids when this process is root (asUser).
 * Operations are independent: each has its own result; it never throws. Synchronous, so nothing
 * else of this process runs while the ids are the user's.
 */
export function runFileOps(ops: readonly FileOp[], user: FileUser | undefined): FileOpResult[] {
  try {
    return asUser(user, () => ops.map(applyFileOp));
  } catch (error) {
    // applyFileOp throws nothing: this is the switch to the user's ids failing, so every op failed.
    const why = `cannot take the ids of uid ${user?.uid}, gid ${user?.gid}: ${(error as Error).message}`;
    return ops.map(() => ({ ok: false, error: why }));
  }
}
