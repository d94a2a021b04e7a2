import { closeSync, constants, existsSync, fchmodSync, fchownSync, fstatSync, mkdirSync, openSync } from "node:fs";
import { dirname, resolve } from "node:path";

/** Who a directory should belong to. */
export interface DirOwner {
  uid: number;
  gid: number;
}

/** Creates one directory (not its parents); an existing real directory is fine. */
export function makeDir(path: string, mode: number, owner?: DirOwner, acceptOwners: number[] = []): void {
  try {
    mkdirSync(path, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  // Open what is there now without following a symlink, check it, then fix owner and mode
  // through the descriptor, so a swapped-in link can never redirect chown/chmod.
  const fd = openSync(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    const st = fstatSync(fd);
    const me = process.geteuid?.() ?? -1;
    if (st.uid !== me && !acceptOwners.includes(st.uid)) throw new Error(`${path} exists but belongs to uid ${st.uid}`);
    if (owner && (st.uid !== owner.uid || st.gid !== owner.gid)) fchownSync(fd, owner.uid, owner.gid);
    fchmodSync(fd, mode);
  } finally {
    closeSync(fd);
  }
}

/**
 * Creates `path` and whichever of its parents are missing, each with exactly `mode` whatever the
 * umask (a job user must be able to enter a dir root made under umask 077); what exists already,
 * also when another process made it meanwhile, is left as it is, as `mkdir -p` leaves it.
 */
export function makeDirs(path: string, mode: number): void {
  const missing: string[] = [];
  for (let dir = resolve(path); !existsSync(dir) && dir !== dirname(dir); dir = dirname(dir)) missing.unshift(dir);
  for (const dir of missing) {
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") continue;
      throw error;
    }
    const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    try {
      fchmodSync(fd, mode);
    } finally {
      closeSync(fd);
    }
  }
}
