import { closeSync, constants, fchmodSync, fchownSync, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, readdirSync, rmdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";

/*
 * Host plumbing the image store needs, copied unchanged from runtime-oci (makeDir and removeTree
 * from its fsops.ts, procStat from its proc.ts) when image management left it: @jobrt/images may
 * not import a runtime. They go once the host-services package holds them (docs/decisions.md,
 * "Images are a host package, not a runtime's").
 */

interface Identity {
  uid: number;
  gid: number;
}

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException)?.code;
}

/** Creates one directory (not its parents); an existing real directory is fine. */
export function makeDir(path: string, mode: number, owner?: Identity, acceptOwners: number[] = []): void {
  try {
    mkdirSync(path, { mode: 0o700 });
  } catch (error) {
    if (errnoOf(error) !== "EEXIST") throw error;
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

/**
 * Removes a tree without following symlinks: links are unlinked, never descended. Returns what
 * could not be removed (path: reason); never throws.
 */
export function removeTree(path: string): string[] {
  const left: string[] = [];
  const walk = (p: string): void => {
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(p);
    } catch (error) {
      if (errnoOf(error) !== "ENOENT") left.push(`${p}: ${(error as Error).message}`);
      return;
    }
    if (st.isDirectory()) {
      let names: string[] = [];
      try {
        names = readdirSync(p);
      } catch (error) {
        left.push(`${p}: ${(error as Error).message}`);
      }
      for (const n of names) walk(join(p, n));
      try {
        rmdirSync(p);
      } catch (error) {
        if (errnoOf(error) !== "ENOENT") left.push(`${p}: ${(error as Error).message}`);
      }
      return;
    }
    try {
      unlinkSync(p);
    } catch (error) {
      if (errnoOf(error) !== "ENOENT") left.push(`${p}: ${(error as Error).message}`);
    }
  };
  walk(path);
  return left;
}

interface ProcStat {
  state: string;
  ppid: number;
  /** Process group id. */
  pgrp: number;
  /** Start time in clock ticks since boot (identifies a pid across reuse). */
  startTime: number;
  /** The exit status as waitpid(2) would report it; meaningful for a zombie we may ptrace-read. */
  exitCode: number;
}

/** /proc/<pid>/stat, or undefined when there is no such process. */
export function procStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name may hold spaces and parentheses: fields start after the last ')'.
  const fields = text.slice(text.lastIndexOf(")") + 2).trim().split(" ");
  return {
    state: fields[0] ?? "?",
    ppid: Number(fields[1]),
    pgrp: Number(fields[2]),
    startTime: Number(fields[19]),
    exitCode: Number(fields[fields.length - 1]),
  };
}
