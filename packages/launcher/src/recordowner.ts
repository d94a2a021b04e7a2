import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync, readSync } from "node:fs";
import type { StepRecord } from "@jobrt/core";

/** Larger than any record jobrt writes (a step.json holds every task's environment). */
const MAX_RECORD_BYTES = 64 * 1024 * 1024;

/**
 * Reads a record file without following a symlink and without blocking on a FIFO, and at most
 * MAX_RECORD_BYTES: root's gc reads records that a job user's `jobrt exec` wrote into a directory
 * that user owns (the Slurm Epilog, docs/slurm.md), so the user controls what is there.
 */
export function readRecordFile(path: string): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    if (!fstatSync(fd).isFile()) throw new Error(`${path} is not a regular file`);
    const chunks: Buffer[] = [];
    let length = 0;
    for (;;) {
      const chunk = Buffer.alloc(64 * 1024);
      const n = readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
      length += n;
      // The user may keep the file growing: stop at the cap instead of reading forever.
      if (length > MAX_RECORD_BYTES) throw new Error(`${path} is larger than ${MAX_RECORD_BYTES} bytes`);
    }
    return Buffer.concat(chunks, length).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

/** The owner of `path` itself when it is a real directory (not a symlink to one), else undefined. */
export function directoryOwner(path: string): number | undefined {
  try {
    const st = lstatSync(path);
    return st.isDirectory() ? st.uid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether a gc running as `me` may act on a record whose directory `owner` owns. Its own records,
 * always. Root also collects a job user's record, because the Slurm Epilog runs `jobrt gc --job`
 * as root while the job's `jobrt exec` ran as the job user, but only when every component of the
 * record runs as the directory's owner: the runtime cleanup then acts as that user (runtime/oci
 * runs its commands as the record's uid), and only that user's processes are killed
 * (`killableBy`). A record without components (no step.json yet) names no user: left alone.
 */
export function mayCollect(owner: number, components: StepRecord[] | undefined, me: number): boolean {
  if (owner === me) return true;
  return me === 0 && components !== undefined && components.length > 0 && components.every((c) => c.uid === owner);
}

/** The real uid of a process, or undefined when it is gone. */
function processUid(pid: number): number | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("Uid:"));
    const uid = line?.split(/\s+/)[1];
    return uid === undefined ? undefined : Number(uid);
  } catch {
    return undefined;
  }
}

/** Whether a task process recorded in a record owned by `owner` may be killed for it. */
export function killableBy(pid: number, owner: number | undefined): boolean {
  return owner === undefined || processUid(pid) === owner;
}
