import { type Stats, lstatSync, readdirSync, rmdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";

/**
 * The launcher's one recursive removal (journal entries; docs/reliability.md, "Threat model").
 * It never follows a symlink (links are unlinked, directories are found with lstat) and never
 * crosses into another file system (a directory on another device is a mount point: it is left,
 * and said so). Returns what it could not remove, one line each; never throws. Node's rmSync
 * unlinks by full path after a readdir too, so a parent swapped for a symlink mid-walk redirects
 * either one: on a job user's journal it runs with the user's rights (asUser), which makes such a
 * swap reach only what the user could remove itself.
 */
export function removeTreeNoFollow(path: string): string[] {
  const left: string[] = [];
  const top = lstatOrLeft(path, left);
  if (top === undefined) return left;
  if (!top.isDirectory()) {
    attempt(path, left, () => unlinkSync(path));
    return left;
  }
  removeDir(path, top.dev, left);
  return left;
}

function removeDir(dir: string, dev: number, left: string[]): void {
  let names: string[] = [];
  try {
    names = readdirSync(dir);
  } catch (error) {
    left.push(`${dir}: ${(error as Error).message}`);
  }
  for (const name of names) {
    const path = join(dir, name);
    const st = lstatOrLeft(path, left);
    if (st === undefined) continue;
    if (!st.isDirectory()) attempt(path, left, () => unlinkSync(path));
    else if (st.dev !== dev) left.push(`${path}: left in place, another file system is mounted there`);
    else removeDir(path, dev, left);
  }
  attempt(dir, left, () => rmdirSync(dir));
}

function lstatOrLeft(path: string, left: string[]): Stats | undefined {
  try {
    return lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") left.push(`${path}: ${(error as Error).message}`);
    return undefined;
  }
}

function attempt(path: string, left: string[], fn: () => void): void {
  try {
    fn();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") left.push(`${path}: ${(error as Error).message}`);
  }
}
