import { closeSync, constants, fchmodSync, fchownSync, fstatSync, mkdirSync, openSync } from "node:fs";

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
    const me = process.getuid?.() ?? -1;
    if (st.uid !== me && !acceptOwners.includes(st.uid)) throw new Error(`${path} exists but belongs to uid ${st.uid}`);
    if (owner && (st.uid !== owner.uid || st.gid !== owner.gid)) fchownSync(fd, owner.uid, owner.gid);
    fchmodSync(fd, mode);
  } finally {
    closeSync(fd);
  }
}
