import type { Stats } from "node:fs";

/**
 * Whether users other than a directory's owner may rename or remove the entries in it, and so swap
 * one for a symlink or a file of their own between a check and its use: it is writable by its group
 * or by others, and not sticky (in a sticky directory, like /tmp, only an entry's owner may).
 */
export function othersMayReplace(st: Pick<Stats, "mode">): boolean {
  return (st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0;
}
