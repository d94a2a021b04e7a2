import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readlinkSync,
} from "node:fs";
import { isAbsolute, posix } from "node:path";
import type { FileUser } from "@jobrt/host-services";

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException)?.code;
}

/** A directory held open, and the path it was reached by (for messages). */
interface Held {
  fd: number;
  path: string;
}

/** `name` inside an open directory, addressed through the descriptor (openat without openat). */
const inside = (dir: Held, name: string) => `/proc/self/fd/${dir.fd}/${name}`;

/**
 * Creates the step spool dir `stepDir` (and missing parents, 0755, owned by the host), walking
 * every component from `/` without following a symlink: each directory is opened O_NOFOLLOW and
 * the next one is looked up through that descriptor, so a component swapped for a link while we
 * walk cannot redirect the mkdir, chown or chmod. Only a symlink owned by root (a system link such
 * as /var/run → /run) is followed; one owned by anybody else (e.g. a user's own component of
 * `ContainerPath=/tmp/shared/%u`) is refused with an error naming it. The step dir itself must be
 * a real directory owned by the host or one of `acceptOwners`; it gets `mode` and `owner`.
 */
export function makeStepDir(stepDir: string, mode: number, owner: FileUser | undefined, acceptOwners: number[]): void {
  if (!isAbsolute(stepDir)) throw new Error(`${stepDir} is not an absolute path`);
  const pending = posix.normalize(stepDir).split("/").filter(Boolean);
  const last = pending.pop();
  if (last === undefined) throw new Error(`${stepDir} is the root directory`);
  let dir: Held = { fd: openSync("/", DIR_FLAGS), path: "/" };
  try {
    let links = 0;
    while (pending.length > 0) {
      const name = pending.shift() as string;
      if (name === "." || name === "..")
        throw new Error(`${posix.join(dir.path, name)}: "." and ".." are not allowed in the spool path`);
      const path = posix.join(dir.path, name);
      let st: ReturnType<typeof lstatSync> | undefined;
      try {
        st = lstatSync(inside(dir, name));
      } catch (error) {
        if (errnoOf(error) !== "ENOENT") throw error;
      }
      if (st?.isSymbolicLink()) {
        if (st.uid !== 0) throw new Error(`${path} is a symbolic link owned by uid ${st.uid}; refusing to follow it`);
        if (++links > 40) throw new Error(`${path}: too many levels of symbolic links`);
        const target = readlinkSync(inside(dir, name));
        if (isAbsolute(target)) {
          closeSync(dir.fd);
          dir = { fd: openSync("/", DIR_FLAGS), path: "/" };
        }
        pending.unshift(...target.split("/").filter(Boolean));
        continue;
      }
      if (!st) {
        try {
          mkdirSync(inside(dir, name), { mode: 0o755 });
        } catch (error) {
          if (errnoOf(error) !== "EEXIST") throw rephrase(error, inside(dir, name), path);
        }
      }
      dir = descend(dir, name, path);
    }
    createLast(dir, last, mode, owner, acceptOwners);
  } finally {
    closeSync(dir.fd);
  }
}

/** The error with the descriptor path in its message replaced by the path the user knows. */
function rephrase(error: unknown, fdPath: string, path: string): Error {
  const e = error as NodeJS.ErrnoException;
  return Object.assign(new Error(e.message.split(fdPath).join(path)), { code: e.code });
}

/** Opens `name` under `dir` without following a link, closes `dir`, returns the new directory. */
function descend(dir: Held, name: string, path: string): Held {
  let fd: number;
  try {
    fd = openSync(inside(dir, name), DIR_FLAGS);
  } catch (error) {
    const code = errnoOf(error);
    if (code !== "ELOOP" && code !== "ENOTDIR") throw rephrase(error, inside(dir, name), path);
    // O_NOFOLLOW|O_DIRECTORY on a link fails with ENOTDIR or ELOOP: say which it is.
    let link = code === "ELOOP";
    try {
      link = lstatSync(inside(dir, name)).isSymbolicLink();
    } catch {
      // gone again: keep the errno's reading
    }
    throw new Error(link ? `${path} is a symbolic link; refusing to follow it` : `${path} is not a directory`);
  }
  closeSync(dir.fd);
  return { fd, path };
}

function createLast(dir: Held, name: string, mode: number, owner: FileUser | undefined, acceptOwners: number[]): void {
  const path = posix.join(dir.path, name);
  try {
    mkdirSync(inside(dir, name), { mode: 0o700 });
  } catch (error) {
    if (errnoOf(error) !== "EEXIST") throw rephrase(error, inside(dir, name), path);
  }
  const held = descend({ ...dir }, name, path);
  // descend closed the parent's descriptor: the caller's `finally` closes this one instead.
  dir.fd = held.fd;
  const st = fstatSync(held.fd);
  const me = process.getuid?.() ?? -1;
  if (st.uid !== me && !acceptOwners.includes(st.uid)) throw new Error(`${path} exists but belongs to uid ${st.uid}`);
  if (owner && (st.uid !== owner.uid || st.gid !== owner.gid)) fchownSync(held.fd, owner.uid, owner.gid);
  fchmodSync(held.fd, mode);
}

/**
 * Is `stepDir` what setup made for `owner`: a real directory of that uid? The host removes the
 * empty step dir itself (its parent is the host's: docs/reliability.md, "Privilege model"), so a
 * path that now reaches another directory (a component of the user's swapped for a link) is left.
 */
export function isStepDirOf(stepDir: string, owner: FileUser): boolean {
  try {
    const st = lstatSync(stepDir);
    return st.isDirectory() && st.uid === owner.uid;
  } catch {
    return false;
  }
}
