import { chmodSync, lstatSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmdirSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Where test temp dirs go: $JOBRT_TEST_TMP when set (the repo's vitest setup points it at a dir it
 * removes when the test file ends), else the system temp dir.
 */
export function tempRoot(): string {
  return process.env.JOBRT_TEST_TMP || tmpdir();
}

/** A fresh temp dir under tempRoot(), named `<prefix>XXXXXX`. */
export function makeTempDir(prefix: string): string {
  return mkdtempSync(join(tempRoot(), prefix));
}

/** Mount points at or below `dir` in this process's mount namespace (/proc/self/mountinfo). */
export function mountsBelow(dir: string): string[] {
  let info: string;
  try {
    info = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return [];
  }
  // Field 5 is the mount point, with space, tab, newline and backslash written as \ooo.
  const points = info.split("\n").map((line) => line.split(" ")[4]?.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8))));
  return points.filter((p): p is string => p !== undefined && (p === dir || p.startsWith(`${dir}/`)));
}

/**
 * Removes `dir` and everything in it without crossing into another file system and without
 * following symlinks; returns what it could not remove, one line each (empty when all is gone).
 * A dir with a mount below it is left whole: deleting through a bind mount or a container's rootfs
 * would delete the mounted files. Dirs that a test made read-only are made writable first (root
 * needs no such help, but a run as another user does).
 */
export function removeTree(dir: string): string[] {
  let top: ReturnType<typeof lstatSync>;
  try {
    top = lstatSync(dir);
  } catch (error) {
    return code(error) === "ENOENT" ? [] : [`${dir}: ${message(error)}`];
  }
  if (!top.isDirectory()) return attempt(dir, () => unlinkSync(dir));
  const real = realpathSync(dir);
  const mounts = mountsBelow(real);
  if (mounts.length > 0) return [`${dir}: left in place, mounted below it: ${mounts.join(", ")} (unmount, then remove it)`];
  const problems: string[] = [];
  removeBelow(dir, top.dev, problems);
  if (problems.length === 0) problems.push(...attempt(dir, () => rmdirSync(dir)));
  return problems;
}

function removeBelow(dir: string, dev: number, problems: string[]): void {
  const names = list(dir, problems);
  for (const name of names) {
    const path = join(dir, name);
    const st = entryStat(dir, path, problems);
    if (st === undefined) continue;
    if (st.isDirectory() && st.dev !== dev) {
      problems.push(`${path}: left in place, another file system is mounted there`);
    } else if (st.isDirectory()) {
      const before = problems.length;
      removeBelow(path, dev, problems);
      if (problems.length === before) problems.push(...attempt(path, () => rmdirSync(path), dir));
    } else {
      problems.push(...attempt(path, () => unlinkSync(path), dir));
    }
  }
}

/** lstat of an entry; a dir a test made unsearchable (no x) is made searchable first. */
function entryStat(dir: string, path: string, problems: string[]): ReturnType<typeof lstatSync> | undefined {
  try {
    return lstatSync(path, { throwIfNoEntry: false });
  } catch (error) {
    if (code(error) !== "EACCES") {
      problems.push(`${path}: ${message(error)}`);
      return undefined;
    }
  }
  try {
    chmodSync(dir, 0o700);
    return lstatSync(path, { throwIfNoEntry: false });
  } catch (error) {
    problems.push(`${path}: ${message(error)}`);
    return undefined;
  }
}

/** The dir's entries; a dir a test made unreadable is made readable first. */
function list(dir: string, problems: string[]): string[] {
  try {
    return readdirSync(dir);
  } catch (error) {
    if (code(error) !== "EACCES") {
      problems.push(`${dir}: ${message(error)}`);
      return [];
    }
  }
  try {
    chmodSync(dir, 0o700);
    return readdirSync(dir);
  } catch (error) {
    problems.push(`${dir}: ${message(error)}`);
    return [];
  }
}

/** Runs a removal; on EACCES/EPERM makes the parent writable and tries once more. */
function attempt(path: string, remove: () => void, parent?: string): string[] {
  try {
    remove();
    return [];
  } catch (error) {
    if (parent === undefined || (code(error) !== "EACCES" && code(error) !== "EPERM")) return [`${path}: ${message(error)}`];
  }
  try {
    chmodSync(parent, 0o700);
    remove();
    return [];
  } catch (error) {
    return [`${path}: ${message(error)}`];
  }
}

function code(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException)?.code;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
