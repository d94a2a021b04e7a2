import { mkdirSync, readFileSync, rmSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
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
export function claimStep(spoolDir: string, jobId?: number): StepClaim {
  const jobsDir = join(spoolDir, "jobs");
  try {
    mkdirSync(jobsDir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new JobrtError("ERR_LAUNCH", `cannot create ${jobsDir}: ${messageOf(error)} (check SpoolDir in jobrt.conf)`);
  }
  const counter = join(jobsDir, "next-jobid");
  let job = jobId;
  try {
    if (job === undefined) {
      let next = 1;
      try {
        next = Math.max(1, Number.parseInt(readFileSync(counter, "utf8"), 10) || 1);
      } catch {
        // first job on this node
      }
      while (!mkdirExclusive(join(jobsDir, String(next)))) next++;
      job = next;
      writeFileSync(counter, `${next + 1}\n`);
    } else {
      mkdirSync(join(jobsDir, String(job)), { recursive: true, mode: 0o700 });
    }
    const jobDir = join(jobsDir, String(job));
    let step = 0;
    while (!mkdirExclusive(join(jobDir, `step-${step}`))) step++;
    const dir = join(jobDir, `step-${step}`);
    writeFileSync(join(dir, "host.json"), `${JSON.stringify({ pid: process.pid, start: processStartTime(process.pid), boot: bootId() })}\n`);
    return {
      jobId: job,
      stepId: step,
      dir,
      release() {
        rmSync(dir, { recursive: true, force: true });
        try {
          rmdirSync(jobDir);
        } catch {
          // another step of the job is still running
        }
      },
    };
  } catch (error) {
    if (error instanceof JobrtError) throw error;
    throw new JobrtError("ERR_LAUNCH", `cannot claim a job id in ${jobsDir}: ${messageOf(error)}`);
  }
}
