import {
  constants,
  type Stats,
  closeSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  realpathSync,
  rmdirSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import { dirname, join, resolve, sep } from "node:path";
import { type JobrtError, jobrtError, messageOf } from "@jobrt/core";
import { othersMayReplace, readNoFollow, removeTree } from "@jobrt/host-services";

/**
 * SpoolDir, checked: `jobsDir` is the one directory this user's records live in. Nothing in it is
 * reached through a symlink, and nobody else can write it (docs/reliability.md, "The spool").
 */
export interface Spool {
  spoolDir: string;
  jobsDir: string;
  uid: number;
  /** A job user's journal (root's gc): the group its files are worked on with, the journal dir's. */
  gid?: number;
}

const myUid = () => process.getuid?.() ?? 0;

function spoolError(message: string): JobrtError {
  return jobrtError("ERR_SPOOL", { problem: message });
}

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** mkdir -p, one component at a time (Node 20's recursive mkdir reports ENOENT on a read-only fs). */
function makeDirs(path: string, mode: number): void {
  let current: string = sep;
  for (const part of resolve(path).split(sep).filter(Boolean)) {
    current = join(current, part);
    try {
      mkdirSync(current, { mode });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST")
        throw spoolError(`cannot create ${current}: ${messageOf(error)} (check SpoolDir in jobrt.conf)`);
    }
  }
}

/**
 * Every directory from / to SpoolDir must be owned by root or this user, and writable by nobody
 * else unless sticky (like /tmp): otherwise another user could swap a component for a symlink.
 */
function checkPath(realSpool: string, uid: number): void {
  let current: string = sep;
  for (const part of ["", ...realSpool.split(sep).filter(Boolean)]) {
    current = join(current, part);
    const st = lstatSync(current);
    if (st.uid !== 0 && st.uid !== uid)
      throw spoolError(
        `${current} belongs to uid ${st.uid}: SpoolDir and its parents must belong to root or uid ${uid}`,
      );
    if (othersMayReplace(st))
      throw spoolError(
        `${current} is writable by other users (mode ${(st.mode & 0o7777).toString(8)}): make it 0755, or 1777 like /tmp`,
      );
  }
}

/**
 * The records directory: `jobs` when SpoolDir is this user's own, `jobs.<uid>` in a SpoolDir that
 * belongs to root and is shared (sticky). It must be a real directory of this user's, mode 0700.
 */
function jobsDirFor(spoolDir: string, uid: number, create: boolean): string | undefined {
  const owner = lstatSync(spoolDir).uid;
  const jobsDir = join(spoolDir, owner === uid ? "jobs" : `jobs.${uid}`);
  let st = lstatOrUndefined(jobsDir);
  if (!st) {
    if (!create) return undefined;
    try {
      mkdirSync(jobsDir, { mode: 0o700 });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EACCES" || code === "EPERM") return undefined;
      if (code !== "EEXIST")
        throw spoolError(`cannot create ${jobsDir}: ${messageOf(error)} (check SpoolDir in jobrt.conf)`);
    }
    st = lstatSync(jobsDir);
  }
  if (st.isSymbolicLink())
    throw spoolError(`${jobsDir} is a symbolic link: remove it (jobrt never follows links in SpoolDir)`);
  if (!st.isDirectory()) throw spoolError(`${jobsDir} is not a directory: remove it`);
  if (st.uid !== uid)
    throw spoolError(`${jobsDir} belongs to uid ${st.uid}, not ${uid} (made by another user?): remove it`);
  if ((st.mode & 0o077) !== 0)
    throw spoolError(`${jobsDir} is open to other users (mode ${(st.mode & 0o777).toString(8)}): chmod 700 it`);
  return jobsDir;
}

/**
 * Opens SpoolDir for this user, creating what is missing. When this user has no place in it (a
 * root-owned SpoolDir that is not shared) it throws if `required`, else returns undefined.
 */
export function openSpool(
  spoolDir: string,
  node: string,
  options: { create: boolean; required?: boolean } = { create: true },
): Spool | undefined {
  const uid = myUid();
  try {
    if (options.create) makeDirs(spoolDir, uid === 0 ? 0o755 : 0o700);
    let real: string;
    try {
      real = realpathSync(spoolDir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT" && !options.create) return undefined;
      throw error;
    }
    checkPath(real, uid);
    const jobsDir = jobsDirFor(real, uid, options.create);
    if (!jobsDir) {
      if (options.required)
        throw spoolError(
          `${real} has no place for uid ${uid}'s records: it belongs to root and is not shared (make it 1777 like /tmp, or set a SpoolDir of the user's own)`,
        );
      return undefined;
    }
    checkNodeMarker(jobsDir, node);
    return { spoolDir: real, jobsDir, uid };
  } catch (error) {
    if ((error as JobrtError).code === "ERR_SPOOL") throw error;
    throw spoolError(`cannot use ${spoolDir}: ${messageOf(error)} (check SpoolDir in jobrt.conf)`);
  }
}

/** Creates `path` with `text`; fails (EEXIST) rather than follow or replace anything there. */
export function writeExclusive(path: string, text: string): void {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

/**
 * Removes a file (or a symlink, never followed); one that is not there is fine, a directory is an
 * error. What `rmSync(path, { force: true })` does, without loading and running Node 20's
 * JavaScript rimraf for one file at every start and end of a step.
 */
export function removeFile(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

/**
 * Removes a directory that holds at most the files named: each is unlinked, then the directory.
 * Anything else found (a symlink in place of the directory, a directory where a file was, a file
 * it did not write) is left to the recursive removal, which never follows a symlink either.
 */
export function removeDirOf(dir: string, names: readonly string[]): void {
  try {
    // Unlinking `dir/name` would follow `dir` itself were it a symlink.
    if (!lstatSync(dir).isDirectory()) throw Object.assign(new Error(`${dir} is not a directory`), { code: "ENOTDIR" });
    for (const name of names) removeFile(join(dir, name));
    rmdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") removeTree(dir);
  }
}

/**
 * A SpoolDir shared by several nodes (NFS) would mix their steps' records and files: the first
 * node to use it leaves its host name in `node`; any other node refuses.
 */
function checkNodeMarker(jobsDir: string, node: string): void {
  const marker = join(jobsDir, "node");
  const me = `${hostname()}\n`;
  let seen = readNoFollow(marker);
  if (seen === undefined) {
    // Written whole under a temporary name, then linked: a reader never sees half a marker, and a
    // full disk leaves none (the step then fails on its own records, or runs without the check).
    const tmp = `${marker}.${process.pid}`;
    try {
      writeExclusive(tmp, me);
      linkSync(tmp, marker);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") return;
      seen = readNoFollow(marker) ?? me;
    } finally {
      removeFile(tmp);
    }
  }
  if (seen !== me) {
    throw spoolError(
      `${dirname(jobsDir)} is in use by host ${JSON.stringify(seen.trim())}, not ${JSON.stringify(hostname())} (node ${node}): each node needs a SpoolDir of its own on local disk (e.g. SpoolDir=/var/spool/jobrt/%n); if the host was renamed, remove ${marker}`,
    );
  }
}
