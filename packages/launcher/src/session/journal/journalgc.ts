import { lstatSync, renameSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { processRunning, removeTree } from "@jobrt/host-services";
import { processStartTime } from "../../processidentity.js";
import { asUser } from "@jobrt/host-services";
import {
  ENTRY,
  FORKER_FILE,
  GC_CLAIM,
  HOST_FILE,
  type HostInfo,
  type JournalRecord,
  MAX_RECORD_BYTES,
  PIDS_FILE,
  RECORD_FILE,
  dropIdleSharedState,
  listDir,
  releaseJobDir,
} from "./journal.js";
import { readNoFollow } from "@jobrt/host-services";
import type { Spool } from "./spool.js";
import { journalOwner } from "./userjournals.js";

/** A journal entry found by `jobrt gc`: its directory, ids, and (when written) its record. */
export interface JournalEntry {
  dir: string;
  jobId: number;
  stepId: number;
  host?: HostInfo;
  record?: JournalRecord;
  /** Set when a `jobrt gc` claimed the entry and died before finishing. */
  staleClaim?: boolean;
  /** When the entry was claimed (ms since the epoch): host.json is written once, then never. */
  since?: number;
}

/*
 * What gc does to a journal (list, read, claim, unclaim, set aside, remove) runs with the rights of
 * the journal's user (`journalOwner`): on a job user's journal, root then does only what that
 * user could do itself, whatever names the user swapped for symlinks, and at whatever moment
 * (docs/reliability.md, "Threat model").
 */

function readJson<T>(path: string): T | undefined {
  try {
    const text = readNoFollow(path, MAX_RECORD_BYTES);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  } catch {
    // Not a regular file of ours (a FIFO, a symlink, too big) or not JSON: no record.
    return undefined;
  }
}

/** Only a real directory is a job dir or an entry: a symlink named like one is never followed. */
function isRealDir(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

function mtimeOf(path: string): number | undefined {
  try {
    return lstatSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

function readEntry(jobDir: string, jobId: number, name: string): JournalEntry | undefined {
  const claim = GC_CLAIM.exec(name);
  const m = ENTRY.exec(claim ? claim[1]! : name);
  const dir = join(jobDir, name);
  if (!m || !isRealDir(dir)) return undefined;
  const entry: JournalEntry = { dir, jobId, stepId: Number(m[1] ?? m[2]) };
  if (claim) {
    // A claim whose collector still runs is its business; a dead collector's is reclaimed.
    const pid = Number(claim[2]);
    if (processRunning(pid) && processStartTime(pid) === claim[3]) return undefined;
    entry.staleClaim = true;
  }
  const record = readJson<JournalRecord>(join(dir, RECORD_FILE));
  const host = record?.host ?? readJson<HostInfo>(join(dir, HOST_FILE));
  if (host) entry.host = host;
  if (record) entry.record = record;
  const since = mtimeOf(join(dir, HOST_FILE));
  if (since !== undefined) entry.since = since;
  return entry;
}

/** Every entry of the journal (of one job, when given), live or not; gc claims included. */
export function listEntries(spool: Spool, jobId?: number): JournalEntry[] {
  return asUser(journalOwner(spool), () => {
    const jobs = listDir(spool.jobsDir).filter((j) => /^\d+$/.test(j) && (jobId === undefined || Number(j) === jobId));
    const out: JournalEntry[] = [];
    for (const job of jobs) {
      const jobDir = join(spool.jobsDir, job);
      if (!isRealDir(jobDir)) continue;
      for (const name of listDir(jobDir)) {
        const entry = readEntry(jobDir, Number(job), name);
        if (entry) out.push(entry);
      }
    }
    return out;
  });
}

/**
 * Takes an entry for cleanup by renaming it to `<entry>.gc-<pid>-<start>`: of several collectors
 * only the rename's winner goes on, and a collector that dies leaves a claim the next one reclaims.
 */
export function claimEntry(spool: Spool, entry: JournalEntry): string | undefined {
  const claimed = `${baseOf(entry.dir)}.gc-${process.pid}-${processStartTime(process.pid) ?? "0"}`;
  try {
    asUser(journalOwner(spool), () => renameSync(entry.dir, claimed));
    return claimed;
  } catch {
    return undefined;
  }
}

function baseOf(dir: string): string {
  return dir.replace(/\.gc-\d+-\d+$/, "");
}

/**
 * Task pids (with start times) a claimed entry recorded. A `pids` that is not a regular file of at
 * most MAX_RECORD_BYTES throws (code ENOTREG, EFBIG or ELOOP): such an entry can never be read.
 */
export function recordedPids(spool: Spool, dir: string): { pid: number; start: string | undefined }[] {
  const text = asUser(journalOwner(spool), () => readNoFollow(join(dir, PIDS_FILE), MAX_RECORD_BYTES)) ?? "";
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [pid, start] = line.split(" ");
      return { pid: Number(pid), start: start === "-" ? undefined : start };
    })
    .filter((p) => Number.isInteger(p.pid) && p.pid > 1);
}

/**
 * The step's task forker a claimed entry recorded, with its uid. A `forker` that is not a regular
 * file of at most 64 KiB throws, as `pids` does.
 */
export function recordedForker(spool: Spool, dir: string): { pid: number; start: string; uid: number } | undefined {
  const text = asUser(journalOwner(spool), () => readNoFollow(join(dir, FORKER_FILE))) ?? "";
  const m = /^(\d+) (\d+) (\d+)\n$/.exec(text);
  return m && Number(m[1]) > 1 ? { pid: Number(m[1]), start: m[2]!, uid: Number(m[3]) } : undefined;
}

/** Gives a claimed entry back (cleanup failed; a later gc tries again). */
export function unclaimEntry(spool: Spool, claimed: string): void {
  asUser(journalOwner(spool), () => renameSync(claimed, baseOf(claimed)));
}

/**
 * Sets a claimed entry aside as `<entry>.bad-<ms>`, a name no gc takes again: an entry that can
 * never be collected (junk for a record file, a cleanup past its bound) must not fail or hold up
 * every later gc. Returns the new name.
 */
export function setAsideEntry(spool: Spool, claimed: string): string {
  const aside = `${baseOf(claimed)}.bad-${Date.now()}`;
  asUser(journalOwner(spool), () => renameSync(claimed, aside));
  return aside;
}

/** Removes a claimed entry, and its job directory once empty; returns what could not be removed. */
export function removeEntry(spool: Spool, claimed: string): string[] {
  return asUser(journalOwner(spool), () => {
    const left = removeTree(claimed);
    if (left.length > 0) return left;
    try {
      const m = ENTRY.exec(basename(baseOf(claimed)));
      if (m?.[2] !== undefined) dropIdleSharedState(dirname(claimed), Number(m[2]));
      releaseJobDir(dirname(claimed));
    } catch {
      // The entry is gone; what else the job dir holds is not gc's to insist on.
    }
    return left;
  });
}
