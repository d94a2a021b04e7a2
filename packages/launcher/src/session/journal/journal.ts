import { linkSync, mkdirSync, readdirSync, renameSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { MAX_STEP_STATE_BYTES, type StepRecord, type StepStateText, jobrtError, messageOf } from "@jobrt/core";
import { bootId, processStartTime } from "../../processidentity.js";
import type { TrackerRecord } from "../proctrack/proctrack.js";
import { removeTree } from "@jobrt/host-services";
import { readNoFollow } from "@jobrt/host-services";
import { type Spool, removeDirOf, removeFile, writeExclusive } from "./spool.js";
import { openEntryDir } from "./entrydir.js";

/**
 * The spool layout, owned here and nowhere else (journalgc.ts, what gc does to an entry, takes its
 * names from here; docs/reliability.md, "Crash recovery"):
 *
 *   <jobsDir>/next-jobid                       next fresh job id (a hint; mkdir is the lock)
 *   <jobsDir>/<J>/next-step                    the job's next step id, while a step of it runs
 *   <jobsDir>/<J>/step-<S>/                    a `jobrt run` step
 *   <jobsDir>/<J>/exec-<S>.<T>.<pid>/          one `jobrt exec` task of a Slurm step
 *       host.json   the host process (pid, start time, boot id), written at the claim
 *       step.json   the JournalRecord, written once every runtime is resolved, again after setup
 *       pids        one line per started task: pid and start time
 *       forker      the step's task forker: pid, start time and uid
 *   <jobsDir>/<J>/exec-<S>[.h<C>].state         the runtime's step state every `jobrt exec` of
 *                                               step S (het component C) uses: the first
 *                                               published wins; the last entry of S out removes it
 *   <entry>.gc-<pid>-<start>                   an entry a `jobrt gc` has claimed
 *   <entry>.bad-<ms>                           an entry gc could not collect and set aside
 */
export interface HostInfo {
  pid: number;
  start: string | undefined;
  boot: string;
}

/** Everything `jobrt gc` needs to clean up after a dead host, as the host itself would. */
export interface JournalRecord {
  host: HostInfo;
  /** The node name the step ran under (SLURMD_NODENAME under Slurm): an input of container ids. */
  nodeName: string;
  proctrack: TrackerRecord;
  // Records written before process tracking lack nodeName and proctrack: readers must allow it.
  components: StepRecord[];
  /** Each component's runtime step state (the JSON text setup returned), by component index. */
  stepStates?: Record<string, string>;
}

/** A live step's entry in the journal, held until `release()`. */
export interface StepJournal {
  jobId: number;
  stepId: number;
  dir: string;
  /** Unique on this node while the entry exists: names the step's cgroup. */
  name: string;
  write(record: Omit<JournalRecord, "host">): void;
  /**
   * The state every process of the step uses: under `jobrt exec` the one the step's first setup
   * published on this node (ours, if we are first); a `jobrt run` step has one process, so its own.
   */
  shareState(step: StepRecord, state: StepStateText): StepStateText;
  recordTaskPid(pid: number): void;
  /** The step's task forker (this process's uid): gc kills it if jobrt died and it did not follow. */
  recordForker(pid: number): void;
  release(): void;
}

export const HOST_FILE = "host.json";
export const RECORD_FILE = "step.json";
export const PIDS_FILE = "pids";
export const FORKER_FILE = "forker";
/** What a step's entry holds when nothing went wrong. */
const ENTRY_FILES = [HOST_FILE, RECORD_FILE, PIDS_FILE, FORKER_FILE];
const STEP_COUNTER = "next-step";
export const ENTRY = /^(?:step-(\d+)|exec-(\d+)\.(\d+)\.(\d+))$/;
const SHARED_STATE = /^exec-(\d+)(?:\.h\d+)?\.state$/;
export const GC_CLAIM = /^(.+)\.gc-(\d+)-(\d+)$/;
/** The most gc reads of one record file (step.json of 1,000 tasks' environments is a few MB). */
export const MAX_RECORD_BYTES = 64 * 1024 * 1024;

export function hostInfo(): HostInfo {
  return { pid: process.pid, start: processStartTime(process.pid), boot: bootId() };
}

function isErrno(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException)?.code === code;
}

function mkdirExclusive(path: string): boolean {
  try {
    mkdirSync(path, { mode: 0o700 });
    return true;
  } catch (error) {
    if (isErrno(error, "EEXIST")) return false;
    throw error;
  }
}

export function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function removeIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // other steps of the job remain
  }
}

function removeIdleJournal(jobsDir: string): void {
  if (listDir(jobsDir).some((name) => name !== "node")) return;
  removeFile(join(jobsDir, "node"));
  removeIfEmpty(jobsDir);
}

/** Best effort: a counter only saves a scan. A fresh temp name each time, created exclusively. */
function writeCounter(dir: string, name: string, next: number): void {
  const tmp = join(dir, `.${name}.${process.pid}.${Math.random().toString(36).slice(2)}`);
  try {
    writeExclusive(tmp, `${next}\n`);
    renameSync(tmp, join(dir, name));
  } catch {
    removeFile(tmp);
  }
}

function readCounter(dir: string, name: string, least: number): number {
  return Math.max(least, Number.parseInt(readNoFollow(join(dir, name), 64) ?? "", 10) || least);
}

function nextJobId(jobsDir: string): number {
  let job = readCounter(jobsDir, "next-jobid", 1);
  while (!mkdirExclusive(join(jobsDir, String(job)))) job++;
  writeCounter(jobsDir, "next-jobid", job + 1);
  return job;
}

/**
 * The next step id of a job: it keeps counting while any step of the job runs, so a step id is
 * never handed out twice in one job (as in Slurm), also after the step that had it ended. The job
 * ends with its last step, which takes the counter with it.
 */
function nextStepId(jobDir: string): number {
  let step = readCounter(jobDir, STEP_COUNTER, 0);
  while (!mkdirExclusive(join(jobDir, `step-${step}`))) step++;
  writeCounter(jobDir, STEP_COUNTER, step + 1);
  return step;
}

/** The last step out removes the job's step counter, then the job dir. */
export function releaseJobDir(jobDir: string): void {
  if (listDir(jobDir).every((name) => name === STEP_COUNTER)) removeFile(join(jobDir, STEP_COUNTER));
  removeIfEmpty(jobDir);
}

function entryJournal(
  jobsDir: string,
  jobId: number,
  stepId: number,
  entry: string,
  createdJobDir: boolean,
): StepJournal {
  const jobDir = join(jobsDir, String(jobId));
  const dir = join(jobDir, entry);
  const pending: string[] = [];
  const held = openEntry(dir, jobDir, createdJobDir);
  // Released already, or something not a regular file planted at its name: not followed.
  const flush = () => pending.length === 0 || held.append(PIDS_FILE, pending.splice(0).join(""));
  return {
    jobId,
    stepId,
    dir,
    // Job ids are unique per SpoolDir only; cgroups are per node: the host's pid makes it unique.
    name: entry.startsWith("exec-") ? `${jobId}.${entry}` : `${jobId}.${entry}.${process.pid}`,
    write(record) {
      const tmp = held.at(`.${RECORD_FILE}.${process.pid}`);
      writeExclusive(tmp, JSON.stringify({ host: hostInfo(), ...record }));
      renameSync(tmp, held.at(RECORD_FILE));
    },
    shareState(step, state) {
      return entry.startsWith("exec-") ? shareExecState(jobDir, step, state) : state;
    },
    recordForker(pid) {
      // Read now, while the pid surely is the forker: jobrt has not reaped it.
      const start = processStartTime(pid);
      if (start === undefined) return;
      try {
        writeExclusive(held.at(FORKER_FILE), `${pid} ${start} ${process.getuid?.() ?? 0}\n`);
      } catch {
        // Something is at its name already (planted by a task of the step?): not followed, not
        // recorded; a stop still kills the forker, and gc its tasks.
      }
    },
    recordTaskPid(pid) {
      // The start time is read at once, while the pid surely is the task; a burst of starts is
      // written together (one write instead of one per task).
      if (pending.length === 0) setImmediate(flush);
      pending.push(`${pid} ${processStartTime(pid) ?? "-"}\n`);
    },
    release() {
      flush();
      held.close();
      removeEntryDir(jobsDir, jobId, stepId, entry);
    },
  };
}

/** The entry's dir, holding host.json; on failure neither it nor a job dir made for it is left. */
function openEntry(dir: string, jobDir: string, createdJobDir: boolean): ReturnType<typeof openEntryDir> {
  try {
    const held = openEntryDir(dir);
    writeExclusive(held.at(HOST_FILE), `${JSON.stringify(hostInfo())}\n`);
    return held;
  } catch (error) {
    removeTree(dir);
    if (createdJobDir) removeIfEmpty(jobDir);
    throw error;
  }
}

/** A released entry goes, and with it what was kept only for it: shared state, counters, the journal. */
function removeEntryDir(jobsDir: string, jobId: number, stepId: number, entry: string): void {
  const jobDir = join(jobsDir, String(jobId));
  removeDirOf(join(jobDir, entry), ENTRY_FILES);
  if (entry.startsWith("exec-")) dropIdleSharedState(jobDir, stepId);
  releaseJobDir(jobDir);
  // A node that only runs Slurm tasks keeps a clean SpoolDir: the last task out takes the
  // journal (and its node marker) with it; `jobrt run` keeps its job id counter there.
  if (entry.startsWith("exec-")) removeIdleJournal(jobsDir);
}

function sharedStateFile(jobDir: string, step: StepRecord): string {
  return join(jobDir, `exec-${step.stepId}${step.het ? `.h${step.het.component}` : ""}.state`);
}

/** Publishes `state` unless another process of the step did first; returns the published one. */
function shareExecState(jobDir: string, step: StepRecord, state: StepStateText): StepStateText {
  const file = sharedStateFile(jobDir, step);
  if (state !== undefined) {
    const tmp = `${file}.${process.pid}.tmp`;
    try {
      writeExclusive(tmp, state);
      // link() fails when the file exists: of several setups only the first is published, whole.
      linkSync(tmp, file);
    } catch (error) {
      if (!isErrno(error, "EEXIST"))
        throw jobrtError("ERR_LAUNCH", {
          problem: `cannot publish the step state in ${file}: ${messageOf(error)} (check SpoolDir in jobrt.conf)`,
        });
    } finally {
      removeFile(tmp);
    }
  }
  let published: string | undefined;
  try {
    published = readNoFollow(file, MAX_STEP_STATE_BYTES + 1);
  } catch {
    // Not a file we wrote (a symlink, say): never followed; this process keeps its own state.
    published = undefined;
  }
  return published !== undefined && isJsonText(published) ? published : state;
}

function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** The last `jobrt exec` entry of a step (live or being collected) takes its shared state with it. */
export function dropIdleSharedState(jobDir: string, stepId: number): void {
  const names = listDir(jobDir);
  const busy = names.some((n) => {
    const m = ENTRY.exec(GC_CLAIM.exec(n)?.[1] ?? n);
    return m?.[2] !== undefined && Number(m[2]) === stepId;
  });
  if (busy) return;
  for (const n of names) if (Number(SHARED_STATE.exec(n)?.[1] ?? -1) === stepId) removeFile(join(jobDir, n));
}

/**
 * Claims a job id (fresh unless given) and the next free step id of that job. `mkdir` is the
 * lock: two hosts on one node never get the same pair. On failure nothing is left behind.
 */
export function claimRunStep(spool: Spool, jobId?: number): StepJournal {
  let createdJobDir = false;
  try {
    let job = jobId;
    if (job === undefined) {
      job = nextJobId(spool.jobsDir);
      createdJobDir = true;
    } else {
      createdJobDir = mkdirExclusive(join(spool.jobsDir, String(job)));
    }
    const jobDir = join(spool.jobsDir, String(job));
    const step = nextStepId(jobDir);
    return entryJournal(spool.jobsDir, job, step, `step-${step}`, createdJobDir);
  } catch (error) {
    throw jobrtError("ERR_LAUNCH", {
      problem: `cannot claim a job id in ${spool.jobsDir}: ${messageOf(error)} (check SpoolDir in jobrt.conf)`,
    });
  }
}

/** Records one `jobrt exec` task of a Slurm step, so `jobrt gc` can clean up if Slurm kills it. */
export function claimExecTask(spool: Spool, jobId: number, stepId: number, taskId: number): StepJournal {
  const jobDir = join(spool.jobsDir, String(jobId));
  const entry = `exec-${stepId}.${taskId}.${process.pid}`;
  try {
    const createdJobDir = mkdirExclusive(jobDir);
    mkdirSync(join(jobDir, entry), { mode: 0o700 });
    return entryJournal(spool.jobsDir, jobId, stepId, entry, createdJobDir);
  } catch (error) {
    throw jobrtError(
      "ERR_LAUNCH",
      { problem: `cannot record the task in ${jobDir}: ${messageOf(error)} (check SpoolDir in jobrt.conf)` },
      { cause: error },
    );
  }
}
