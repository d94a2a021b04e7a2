import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { expect } from "vitest";
import { jobrtBin, runProgram } from "../helpers/jobrt.js";
import { type JobrtSite, listTree, slurm, slurmEnv, sortedLines, waitFor } from "./cluster.js";

/** The `jobrt exec` processes (not srun, not the task) whose command line holds `marker`, with their node. */
export function jobrtExecProcesses(marker: string): { pid: number; node: string }[] {
  const found: { pid: number; node: string }[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      // Node as the entry (jobrt.pl) runs it: "node" from PATH.
      const isNode = argv[0] === process.execPath || argv[0] === "node";
      if (!isNode || argv[2] !== jobrtBin || argv[3] !== "exec" || !argv.includes(marker)) continue;
      const env = readFileSync(`/proc/${entry}/environ`, "utf8").split("\0");
      const node = env.find((e) => e.startsWith("SLURMD_NODENAME="))?.slice("SLURMD_NODENAME=".length) ?? "?";
      found.push({ pid: Number(entry), node });
    } catch {
      // gone while we looked
    }
  }
  return found.sort((a, b) => a.node.localeCompare(b.node));
}

/** Processes whose command line is exactly `sleep <marker>` (the tasks, inside their containers). */
export const sleepers = (marker: string) =>
  runProgram(["pgrep", "-f", `^(/bin/)?sleep ${marker}$`]).then((p) => sortedLines(p.stdout));

export interface RunningStep {
  job: ChildProcess;
  jobId: string;
  marker: string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** Every marker a test used: a failed test's tasks (a rootless container's) are killed by them at the end. */
export const markers: string[] = [];

/**
 * Starts `srun -N 2 -n 2 jobrt exec ... -- sleep <marker>` (with `env` added to srun's
 * environment, which the tasks get) and waits until both containers' tasks run.
 */
export async function startSleepStep(
  site: JobrtSite,
  srunArgs: string[],
  jobrtArgs: string[],
  env: Record<string, string> = {},
): Promise<RunningStep> {
  // A duration no other process on the machine sleeps, to find the tasks from outside.
  const marker = String(100000 + Math.floor(Math.random() * 800000));
  markers.push(marker);
  const name = `jobrt-cleanup-${marker}`;
  const job = spawn(
    "srun",
    ["-N", "2", "-n", "2", "--job-name", name, ...srunArgs, "jobrt", "exec", ...jobrtArgs, "--", "sleep", marker],
    {
      env: slurmEnv({ ...site.env, ...env }),
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  let stderr = "";
  job.stderr?.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((res) => job.on("close", (code) => res(code)));
  try {
    await waitFor(async () => job.exitCode !== null || (await sleepers(marker)).length === 2, 60_000, 200);
    expect(job.exitCode, `srun ended before its tasks ran: ${stderr}`).toBeNull();
    const jobId = (await slurm(["squeue", "-h", "-n", name, "-o", "%i"])).stdout.trim();
    expect(jobId).toMatch(/^\d+$/);
    return { job, jobId, marker, stderr: () => stderr, exited };
  } catch (error) {
    job.kill("SIGKILL");
    throw error;
  }
}

export const jobGone = (jobId: string) =>
  waitFor(async () => (await slurm(["squeue", "-h", "-j", jobId, "-o", "%T"])).stdout.trim() === "", 60_000, 200);

/**
 * What a finished job left in any node's SpoolDir of `s`: any file, or anything named after the
 * job. A journal's `node` marker (which host uses the SpoolDir) stays by design.
 */
export function spoolLeftovers(s: JobrtSite, jobId: string): string[] {
  const mentions = new RegExp(`(^|\\D)${jobId}(\\D|$)`);
  return listTree(s.spoolRoot).filter(
    (p) => !/^node[ab]\/jobs(\.\d+)?\/node$/.test(p) && (!p.endsWith("/") || mentions.test(p)),
  );
}

/** The journal entries of the job's `jobrt exec` tasks (`jobs`, or `jobs.<uid>` for a job user). */
export const execRecords = (s: JobrtSite, jobId: string) =>
  listTree(s.spoolRoot).filter((p) =>
    new RegExp(`^node[ab]/jobs(\\.\\d+)?/${jobId}/exec-\\d+\\.\\d+\\.\\d+/$`).test(p),
  );

/** A process as /proc/PID/stat shows it: its parent, its start time (clock ticks after boot), its state. */
function procStat(pid: number): { ppid: number; start: string; state: string } | undefined {
  try {
    const rest = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ").pop()!.split(" ");
    return { state: rest[0]!, ppid: Number(rest[1]), start: rest[19]! };
  } catch {
    return undefined;
  }
}

/** Every live descendant of `roots` (not the roots), by pid and start time. */
export function descendants(roots: number[]): { pid: number; start: string }[] {
  const children = new Map<number, { pid: number; start: string }[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const s = procStat(Number(entry));
    if (!s || s.state === "Z") continue;
    children.set(s.ppid, [...(children.get(s.ppid) ?? []), { pid: Number(entry), start: s.start }]);
  }
  const out: { pid: number; start: string }[] = [];
  const walk = (pid: number): void => {
    for (const c of children.get(pid) ?? []) {
      out.push(c);
      walk(c.pid);
    }
  };
  for (const r of roots) walk(r);
  return out;
}

/** Those of `procs` that are still that very process and not a zombie. */
export function stillRunning(procs: { pid: number; start: string }[]): number[] {
  return procs
    .filter((p) => {
      const s = procStat(p.pid);
      return s !== undefined && s.start === p.start && s.state !== "Z";
    })
    .map((p) => p.pid);
}
