import { type Stats, chmodSync, lstatSync, readdirSync, realpathSync, rmdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { mountsBelow } from "./mountinfo.js";

export interface RemoveTreeOptions {
  /**
   * Make a dir that refuses the removal (no read, search or write permission) 0700 and try again.
   * For trees the caller made itself (test dirs): never for a tree another user controls.
   */
  fixModes?: boolean;
}

/**
 * The one recursive removal of jobrt (docs/reliability.md, "Threat model"). It never follows a
 * symlink (links are unlinked; directories are found with lstat) and never deletes through a
 * mount: a tree with a mount point at or below it (mountinfo, which also sees a bind mount of the
 * same file system) is left whole and named, and a directory on another device (st_dev) met on
 * the way is left in place. Returns what it could not remove, one line each; never throws. A dir
 * is removed only when all below it went. Node has no unlinkat, so entries are removed by full
 * path: a parent swapped for a symlink mid-walk redirects that, which is why a tree a job user
 * controls is removed with that user's rights (docs/reliability.md).
 */
export function removeTree(path: string, options: RemoveTreeOptions = {}): string[] {
  const left: string[] = [];
  const top = lstatOrLeft(path, left);
  if (top === undefined) return left;
  if (!top.isDirectory()) {
    attempt(path, left, () => unlinkSync(path));
    return left;
  }
  let real: string;
  try {
    real = realpathSync(path);
  } catch (error) {
    return [`${path}: ${(error as Error).message}`];
  }
  const mounts = mountsBelow(real);
  if (mounts.length > 0)
    return [`${path}: left in place, mounted below it: ${mounts.join(", ")} (unmount, then remove it)`];
  removeBelow(path, top.dev, left, options);
  // The top's parent is not the caller's to fix: it may be /tmp.
  if (left.length === 0) attempt(path, left, () => rmdirSync(path));
  return left;
}

function removeBelow(dir: string, dev: number, left: string[], options: RemoveTreeOptions): void {
  for (const name of list(dir, left, options)) {
    const path = join(dir, name);
    const fixIn = options.fixModes ? dir : undefined;
    const st = lstatOrLeft(path, left, fixIn);
    if (st === undefined) continue;
    if (!st.isDirectory()) attempt(path, left, () => unlinkSync(path), fixIn);
    else if (st.dev !== dev) left.push(`${path}: left in place, another file system is mounted there`);
    else {
      const before = left.length;
      removeBelow(path, dev, left, options);
      if (left.length === before) attempt(path, left, () => rmdirSync(path), fixIn);
    }
  }
}

/** The dir's entries; with fixModes, a dir made unreadable is made readable first. */
function list(dir: string, left: string[], options: RemoveTreeOptions): string[] {
  return retried(dir, left, options.fixModes ? dir : undefined, () => readdirSync(dir)) ?? [];
}

/** lstat; undefined (and nothing said) when the entry is gone already. */
function lstatOrLeft(path: string, left: string[], fixIn?: string): Stats | undefined {
  return retried(path, left, fixIn, () => lstatSync(path, { throwIfNoEntry: false }));
}

function attempt(path: string, left: string[], remove: () => void, fixIn?: string): void {
  retried(path, left, fixIn, remove);
}

/**
 * Runs `fn`; on EACCES/EPERM with `fixIn`, makes that dir 0700 (after lstat says it is a dir, not
 * a link) and runs it once more. ENOENT is success: someone else removed it first.
 */
function retried<T>(path: string, left: string[], fixIn: string | undefined, fn: () => T): T | undefined {
  try {
    return fn();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    if (fixIn === undefined || (code !== "EACCES" && code !== "EPERM")) {
      left.push(`${path}: ${(error as Error).message}`);
      return undefined;
    }
  }
  try {
    if (lstatSync(fixIn).isDirectory()) chmodSync(fixIn, 0o700);
    return fn();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") left.push(`${path}: ${(error as Error).message}`);
    return undefined;
  }
}
