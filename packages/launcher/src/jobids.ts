import { mkdirSync, readFileSync, renameSync, rmSync, rmdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { JobrtError, messageOf } from "@jobrt/core";
import { bootId, processStartTime } from "./proc.js";

/** A job step's claim on its ids, held for the step's life in SpoolDir/jobs/<J>/step-<S>. */
export interface StepClaim {
  jobId: number;
  stepId: number;
  dir: string;
  release(): void;
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

/**
 * Claims a job id (fresh unless given) and the next free step id of that job. `mkdir` is the
 * lock: two `jobrt run` processes on one node can never get the same pair.
 */
/**
 * mkdir -p, one component at a time: Node 20's recursive mkdir reports ENOENT on a read-only
 * file system (and spins under /proc), which would blame a directory that exists.
 */
function makeDirs(path: string, mode: number): void {
  const parts = resolve(path).split(sep).filter(Boolean);
  let current: string = sep;
  for (const part of parts) {
    current = join(current, part);
    try {
      mkdirSync(current, { mode });
    } catch (error) {
      if (!isErrno(error, "EEXIST")) throw error;
    }
  }
}

/** Best effort: the counter only saves a scan, so a full disk must not fail the step here. */
function writeCounter(path: string, next: number): void {
  const tmp = `${path}.${process.pid}`;
  try {
    writeFileSync(tmp, `${next}\n`);
    renameSync(tmp, path);
  } catch {
    rmSync(tmp, { force: true });
  }
}

/**
 * Claims a job id (fresh unless given) and the next free step id of that job. `mkdir` is the
 * lock: two `jobrt run` processes on one node can never get the same pair. On failure nothing
 * of the claim is left behind.
 */
export function claimStep(spoolDir: string, jobId?: number): StepClaim {
  const jobsDir = join(spoolDir, "jobs");
  try {
    // SpoolDir itself is searchable by all: runtimes make per-user directories inside it.
    makeDirs(spoolDir, 0o755);
    makeDirs(jobsDir, 0o700);
  } catch (error) {
    throw new JobrtError("ERR_LAUNCH", `cannot create ${jobsDir}: ${messageOf(error)} (check SpoolDir in jobrt.conf)`);
  }
  const counter = join(jobsDir, "next-jobid");
  let jobDir: string | undefined;
  let createdJobDir = false;
  let dir: string | undefined;
  try {
    let job = jobId;
    if (job === undefined) {
      let next = 1;
      try {
        next = Math.max(1, Number.parseInt(readFileSync(counter, "utf8"), 10) || 1);
      } catch {
        // first job on this node
      }
      while (!mkdirExclusive(join(jobsDir, String(next)))) next++;
      job = next;
      createdJobDir = true;
      writeCounter(counter, next + 1);
    } else {
      createdJobDir = mkdirExclusive(join(jobsDir, String(job)));
    }
    jobDir = join(jobsDir, String(job));
    let step = 0;
    while (!mkdirExclusive(join(jobDir, `step-${step}`))) step++;
    dir = join(jobDir, `step-${step}`);
    writeFileSync(join(dir, "host.json"), `${JSON.stringify({ pid: process.pid, start: processStartTime(process.pid), boot: bootId() })}\n`);
    const claimed = { jobDir, dir };
    return {
      jobId: job,
      stepId: step,
      dir,
      release() {
        rmSync(claimed.dir, { recursive: true, force: true });
        try {
          rmdirSync(claimed.jobDir);
        } catch {
          // another step of the job is still running
        }
      },
    };
  } catch (error) {
    if (dir) rmSync(dir, { recursive: true, force: true });
    if (jobDir && createdJobDir) {
      try {
        rmdirSync(jobDir);
      } catch {
        // a concurrent step of the same job uses it
      }
    }
    throw new JobrtError("ERR_LAUNCH", `cannot claim a job id in ${jobsDir}: ${messageOf(error)} (check SpoolDir in jobrt.conf)`);
  }
}

/**
 * Records one `jobrt exec` task of a Slurm step in SpoolDir/jobs/<J>/exec-<S>.<T>.<pid>, so that
 * `jobrt gc` can clean up after it if Slurm's SIGKILL (or anything else) ends it before cleanup.
 */
export function claimExecTask(spoolDir: string, jobId: number, stepId: number, taskId: number): StepClaim {
  const jobDir = join(spoolDir, "jobs", String(jobId));
  const dir = join(jobDir, `exec-${stepId}.${taskId}.${process.pid}`);
  try {
    makeDirs(spoolDir, 0o755);
    makeDirs(jobDir, 0o700);
    mkdirSync(dir, { mode: 0o700 });
    writeFileSync(join(dir, "host.json"), `${JSON.stringify({ pid: process.pid, start: processStartTime(process.pid), boot: bootId() })}\n`);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw new JobrtError("ERR_LAUNCH", `cannot record the task in ${jobDir}: ${messageOf(error)} (check SpoolDir in jobrt.conf)`);
  }
  return {
    jobId,
    stepId,
    dir,
    release() {
      rmSync(dir, { recursive: true, force: true });
      // Empty directories go too, so a node that only runs Slurm tasks keeps a clean SpoolDir.
      for (const d of [jobDir, dirname(jobDir)]) {
        try {
          rmdirSync(d);
        } catch {
          break; // other tasks, steps or jobs remain
        }
      }
    },
  };
}
