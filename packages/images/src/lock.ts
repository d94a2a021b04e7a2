import { existsSync, fstatSync, lstatSync, readdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { inUseDir, lockFile } from "./store.js";

/**
 * `<hex>.lock` lives only as long as its image: the helper that finds the image gone (removed,
 * or never pulled) unlinks it while it still holds it (docs/runtime-oci.md, "The image cache").
 * A waiter may then get the lock on the unlinked file while a newcomer locks a new one at the
 * same path; so every helper first checks that the file it holds is the one at the path, and
 * one that holds a stale lock takes it anew.
 *
 * flock(1) opened the lock file and hands its descriptor on to the helper: the helper holds the
 * current lock when one of its descriptors is the file now at the path (same device and inode).
 */
export function holdsCurrentLock(store: string, hex: string): boolean {
  let current: { dev: number; ino: number };
  try {
    current = lstatSync(lockFile(store, hex));
  } catch {
    return false;
  }
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      const st = fstatSync(Number(fd));
      if (st.dev === current.dev && st.ino === current.ino) return true;
    } catch {
      // the descriptor readdir itself used, now closed
    }
  }
  return false;
}

/** Unlinks the lock of an image that is gone (no image dir, no marks); the caller holds the lock. */
export function dropLockIfUnused(store: string, hex: string): void {
  if (existsSync(join(store, hex)) || existsSync(inUseDir(store, hex))) return;
  try {
    unlinkSync(lockFile(store, hex));
  } catch {
    // already gone
  }
}
