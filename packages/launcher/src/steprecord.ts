import { appendFileSync, readdirSync, renameSync, rmSync, rmdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { NodeConf, RuntimeRegistry, StepRecord } from "@jobrt/core";
import { messageOf } from "@jobrt/core";
import { bootId, isSameProcess, processStartTime } from "./proc.js";
import { directoryOwner, killableBy, mayCollect, readRecordFile } from "./recordowner.js";

/**
 * What a live step leaves in SpoolDir/jobs/<J>/step-<S>/ so that `jobrt gc` can clean up after a
 * host that died (SIGKILL, OOM, power): the host process, the step's records (runtime, tasks,
 * container request) and the task processes it started.
 */
export interface StepFile {
  host: { pid: number; start: string | undefined; boot: string };
  components: StepRecord[];
}

const STEP_FILE = "step.json";
const PIDS_FILE = "pids";

/** Written (atomically) once every runtime is resolved, before any setup creates anything. */
export function writeStepFile(dir: string, components: StepRecord[]): void {
  const file: StepFile = { host: { pid: process.pid, start: processStartTime(process.pid), boot: bootId() }, components };
  const tmp = join(dir, `.${STEP_FILE}.${process.pid}`);
  writeFileSync(tmp, JSON.stringify(file), { mode: 0o600 });
  renameSync(tmp, join(dir, STEP_FILE));
}

const pendingPids = new Map<string, string[]>();

/**
 * One line per started task: its pid (= its process group) and start time. The start time is read
 * at once, while the pid surely is the task; the lines of one burst of starts are written together
 * (one write instead of one per task, which showed in the per-task launch cost).
 */
export function recordTaskPid(dir: string, pid: number): void {
  const line = `${pid} ${processStartTime(pid) ?? "-"}\n`;
  let lines = pendingPids.get(dir);
  if (!lines) {
    lines = [];
    pendingPids.set(dir, lines);
    setImmediate(() => flushTaskPids(dir));
  }
  lines.push(line);
}

function flushTaskPids(dir: string): void {
  const lines = pendingPids.get(dir);
  pendingPids.delete(dir);
  if (!lines?.length) return;
  try {
    appendFileSync(join(dir, PIDS_FILE), lines.join(""), { mode: 0o600 });
  } catch {
    // the step is over and its record already gone
  }
}

export interface OrphanStep {
  dir: string;
  jobId: number;
  stepId: number;
  file?: StepFile;
  /** Set when the record is another user's (root collecting a job user's record): that uid. */
  owner?: number;
}

/** Which orphans findOrphanSteps lists: `jobId`, only that job's steps (`jobrt gc --job`). */
export interface OrphanFilter {
  jobId?: number;
}

function readStepFile(dir: string): StepFile | undefined {
  try {
    return JSON.parse(readRecordFile(join(dir, STEP_FILE))) as StepFile;
  } catch {
    return undefined;
  }
}

function hostOf(dir: string): { pid: number; start?: string; boot?: string } | undefined {
  const file = readStepFile(dir);
  if (file) return file.host;
  try {
    // A step that died before its step file was written has only the claim's host.json.
    return JSON.parse(readRecordFile(join(dir, "host.json"))) as { pid: number; start?: string; boot?: string };
  } catch {
    return undefined;
  }
}

/** Steps in SpoolDir whose host process is gone. A live step is never listed. */
export function findOrphanSteps(spoolDir: string, filter: OrphanFilter = {}): OrphanStep[] {
  const jobsDir = join(spoolDir, "jobs");
  const orphans: OrphanStep[] = [];
  const me = process.getuid?.() ?? 0;
  let jobs: string[];
  try {
    jobs = readdirSync(jobsDir).filter((j) => /^\d+$/.test(j) && (filter.jobId === undefined || j === String(filter.jobId)));
  } catch {
    return orphans;
  }
  for (const job of jobs) {
    // A job directory that is a symlink is not one jobrt made: its records may be anywhere.
    if (directoryOwner(join(jobsDir, job)) === undefined) continue;
    let steps: string[];
    try {
      // step-<S>: a `jobrt run` step; exec-<S>.<T>.<pid>: one `jobrt exec` task of a Slurm step.
      steps = readdirSync(join(jobsDir, job)).filter((s) => /^(step-\d+|exec-\d+\.\d+\.\d+)$/.test(s));
    } catch {
      continue;
    }
    for (const step of steps) {
      const dir = join(jobsDir, job, step);
      const owner = directoryOwner(dir);
      const file = readStepFile(dir);
      // gc acts (kills, runtime cleanup) with its own rights: see mayCollect for whose records.
      if (owner === undefined || !mayCollect(owner, file?.components, me)) continue;
      const host = hostOf(dir);
      // A claim being written right now has no host file yet: leave it alone.
      if (!host) continue;
      if (isSameProcess(host.pid, host.start, host.boot ?? "")) continue;
      const stepId = Number(/^(?:step|exec)-(\d+)/.exec(step)?.[1]);
      orphans.push({ dir, jobId: Number(job), stepId, ...(file ? { file } : {}), ...(owner !== me ? { owner } : {}) });
    }
  }
  return orphans;
}

export interface CollectResult {
  dir: string;
  killed: number;
  cleaned: string[];
  errors: string[];
}

/**
 * Cleans up one orphaned step: kills the task process groups it recorded (only those that are
 * still the same processes), runs each component's runtime cleanup with the saved StepRecord, and
 * removes the step's directory. A concurrent collector cannot take the same step: the directory is
 * renamed first and only the rename's winner goes on.
 */
export async function collectOrphan(orphan: OrphanStep, registry: RuntimeRegistry, node: NodeConf): Promise<CollectResult | undefined> {
  const claimed = `${orphan.dir}.gc-${process.pid}`;
  try {
    renameSync(orphan.dir, claimed);
  } catch {
    return undefined;
  }
  const result: CollectResult = { dir: orphan.dir, killed: 0, cleaned: [], errors: [] };
  const boot = orphan.file?.host.boot ?? "";
  let pids: string[] = [];
  try {
    pids = readRecordFile(join(claimed, PIDS_FILE)).split("\n").filter(Boolean);
  } catch {
    // no task had started
  }
  for (const line of pids) {
    const [pidText, start] = line.split(" ");
    const pid = Number(pidText);
    if (!Number.isInteger(pid) || pid <= 1 || !isSameProcess(pid, start, boot) || !killableBy(pid, orphan.owner)) continue;
    try {
      process.kill(-pid, "SIGKILL");
      result.killed++;
    } catch {
      // the group is already gone
    }
  }
  for (const record of orphan.file?.components ?? []) {
    try {
      const index = await registry.load(record.runtime || undefined, "node");
      await registry.cleanup(index, node, record);
      result.cleaned.push(record.runtime);
    } catch (error) {
      result.errors.push(messageOf(error));
    }
  }
  if (result.errors.length > 0) {
    // Keep the record so that a later gc can try again; the caller reports the errors.
    renameSync(claimed, orphan.dir);
    return result;
  }
  rmSync(claimed, { recursive: true, force: true });
  try {
    rmdirSync(dirname(claimed));
  } catch {
    // other steps of the job remain
  }
  return result;
}
