import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { type Dirent, chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, afterEach } from "vitest";
import {
  type RunOptions,
  type RunResult,
  jobrtBin,
  jobrtEntry,
  repoRoot,
  runProgram,
  tempDir,
} from "../helpers/jobrt.js";

/**
 * The two-node local Slurm that tests/slurm/* run against (scripts/slurm-local.sh). Its own
 * directory, so a cluster someone started by hand in the default one is never touched (the
 * script refuses to start while another local cluster runs).
 */
export const slurmDir = join(tmpdir(), "jobrt-slurm-e2e");
export const slurmConf = join(slurmDir, "slurm.conf");
const script = join(repoRoot, "scripts/slurm-local.sh");

/**
 * Several people (or vitest runs) may run these tests on one machine at once, and the cluster's
 * namespaces and ports are machine-wide: each test file holds this lock from start to stop. The
 * holder is a `flock ... cat` child; closing its stdin (or this process dying) releases it.
 */
const lockFile = join(tmpdir(), "jobrt-slurm-e2e.lock");
let lockHolder: ChildProcess | undefined;

export async function lockCluster(): Promise<void> {
  if (lockHolder) return;
  const holder = spawn("flock", ["-x", lockFile, "-c", "echo locked; exec cat >/dev/null"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  await new Promise<void>((resolveLock, reject) => {
    holder.once("error", reject);
    holder.once("exit", (code) => reject(new Error(`flock ${lockFile} exited ${code} before taking the lock`)));
    holder.stdout?.once("data", () => resolveLock());
  });
  lockHolder = holder;
}

export function unlockCluster(): void {
  lockHolder?.stdin?.end();
  lockHolder = undefined;
}

/**
 * `jobrt`: the command the cluster's Epilog runs as `jobrt gc --job $SLURM_JOB_ID` (a site's
 * wrapper); `proctrack`: Slurm's ProctrackType; `gpus`: a GPU GRES of `count` per node on the
 * device `files` (gres.conf File=); `constrainDevices`: task/cgroup with cgroup.conf
 * ConstrainDevices=yes; `plugstack`: slurm.conf PlugStackConfig (SPANK plugins). A running cluster
 * started otherwise is restarted.
 */
export async function startCluster(
  nodes = 2,
  jobrt?: string,
  proctrack: "linuxproc" | "cgroup" = "linuxproc",
  gpus?: { count: number; files: string },
  constrainDevices = false,
  plugstack?: string,
): Promise<void> {
  await lockCluster();
  const epilog = jobrt === undefined ? [] : ["--jobrt", jobrt];
  const gres = gpus === undefined ? [] : ["--gpus", String(gpus.count), "--gpu-files", gpus.files];
  const argv = [
    "sh",
    script,
    "start",
    "--nodes",
    String(nodes),
    "--dir",
    slurmDir,
    "--proctrack",
    proctrack,
    ...epilog,
    ...gres,
    ...(constrainDevices ? ["--constrain-devices"] : []),
    ...(plugstack === undefined ? [] : ["--plugstack", plugstack]),
  ];
  const r = await runProgram(argv, { timeoutMs: 280_000 });
  if (r.code !== 0) throw new Error(`slurm-local.sh start exited ${r.code ?? r.signal}:\n${r.stdout}${r.stderr}`);
}

/**
 * Stops the cluster and releases the lock (also when stopping fails). Exit 3 means there was no
 * cluster to stop: a start that failed has already removed what it made.
 */
export async function stopCluster(): Promise<void> {
  try {
    const r = await runProgram(["sh", script, "stop", "--dir", slurmDir], { timeoutMs: 120_000 });
    if (r.code !== 0 && r.code !== 3)
      throw new Error(`slurm-local.sh stop exited ${r.code ?? r.signal}:\n${r.stdout}${r.stderr}`);
  } finally {
    unlockCluster();
  }
}

/** The last lines of every daemon log, for the console when a test failed. */
export function clusterLogs(lines = 30): string {
  const logDir = join(slurmDir, "log");
  if (!existsSync(logDir)) return "(no logs)";
  return readdirSync(logDir)
    .map((f) => {
      const text = readFileSync(join(logDir, f), "utf8").trimEnd().split("\n").slice(-lines).join("\n");
      return `==> ${f} <==\n${text}`;
    })
    .join("\n");
}

/**
 * Environment for Slurm clients: this cluster's slurm.conf, and none of the SLURM_* / SRUN_*
 * variables of a job the test runner itself may be part of (srun would read them as options).
 */
export function slurmEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || /^(SLURM|SRUN|SBATCH|SALLOC)_/.test(k)) continue;
    env[k] = v;
  }
  return { ...env, SLURM_CONF: slurmConf, ...extra };
}

/** Runs a Slurm client (srun, sbatch, squeue, ...) against the local cluster. */
export function slurm(argv: string[], options: RunOptions & { env?: Record<string, string> } = {}): Promise<RunResult> {
  return runProgram(argv, { timeoutMs: 90_000, ...options, env: slurmEnv(options.env ?? {}) });
}

/** stderr without srun's own allocation progress (a job that waited for nodes still completing the last one). */
export function withoutAllocation(text: string): string {
  return text.replace(/^srun: job \d+ (queued and waiting for resources|has been allocated resources)\n/gm, "");
}

/** Output lines, sorted: task output arrives in any order. */
export function sortedLines(text: string): string[] {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "")
    .sort();
}

export interface JobrtSite {
  /** Everything the site consists of; remove it when done. */
  root: string;
  /** Directory holding the `jobrt` wrapper (put it first on PATH). */
  binDir: string;
  /** Parent of every node's SpoolDir (`<spoolRoot>/<node>`). */
  spoolRoot: string;
  /** Environment for srun/sbatch so tasks find `jobrt`. */
  env: Record<string, string>;
}

/**
 * A jobrt installation on every node. On a real cluster each node has its own /etc/jobrt and a
 * SpoolDir on local disk; the test nodes share this machine's filesystem, so the wrapper picks
 * the conf dir of the node it runs on (SLURMD_NODENAME), each naming its own SpoolDir. KillWait
 * (default 2) stays below slurm.conf's KillWait (10), so jobrt's own kill-and-cleanup finishes
 * before Slurm's SIGKILL.
 */
export function jobrtSite(nodes = ["nodea", "nodeb"], killWait = 2): JobrtSite {
  if (!existsSync(jobrtBin)) throw new Error(`${jobrtBin} is missing: build first (pnpm turbo run build)`);
  const root = tempDir("jobrt-slurm-site-");
  const binDir = join(root, "bin");
  const spoolRoot = join(root, "spool");
  mkdirSync(binDir);
  // Jobs of ordinary users run jobrt as themselves: the install must be readable by them and
  // SpoolDir writable (sticky, like /tmp).
  for (const dir of [root, binDir, join(root, "etc"), spoolRoot]) {
    mkdirSync(dir, { recursive: true });
    chmodSync(dir, 0o755);
  }
  for (const node of [...nodes, "not-in-slurm"]) {
    mkdirSync(join(root, "etc", node), { mode: 0o755 });
    mkdirSync(join(spoolRoot, node));
    chmodSync(join(spoolRoot, node), 0o1777);
    writeFileSync(join(root, "etc", node, "jobrt.conf"), `SpoolDir=${join(spoolRoot, node)}\nKillWait=${killWait}\n`);
  }
  const wrapper = join(binDir, "jobrt");
  writeFileSync(
    wrapper,
    `#!/bin/sh\nJOBRT_CONF_DIR='${root}/etc/'"\${SLURMD_NODENAME:-not-in-slurm}"\nPATH='${dirname(process.execPath)}':"$PATH"\nexport JOBRT_CONF_DIR PATH\nexec '${jobrtEntry}' "$@"\n`,
  );
  chmodSync(wrapper, 0o755);
  return { root, binDir, spoolRoot, env: { PATH: `${binDir}:${process.env.PATH ?? "/usr/bin:/bin"}` } };
}

/** Every path under `dir` (relative), directories marked with a trailing slash. */
export function listTree(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    let entries: Dirent[];
    try {
      entries = readdirSync(join(dir, rel), { withFileTypes: true });
    } catch (error) {
      // Removed while we walk (a step's cleanup racing the poll): what is gone is no leftover.
      if ((error as NodeJS.ErrnoException).code === "ENOENT" && rel !== "") return;
      throw error;
    }
    for (const entry of entries) {
      const path = rel === "" ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        out.push(`${path}/`);
        walk(path);
      } else out.push(path);
    }
  };
  if (existsSync(dir)) walk("");
  return out.sort();
}

/**
 * Ids of the containers in runc's default state dir (shared by both test nodes) whose bundle lies
 * under one of `roots`: other test files may run runc containers of their own at the same time.
 */
export function runcContainers(roots: string[]): string[] {
  let text = "";
  // `runc list` fails when a container (anyone's) vanishes while it reads the state dir: retry.
  for (let attempt = 1; ; attempt++) {
    try {
      text = execFileSync("runc", ["list", "--format", "json"], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      }).trim();
      break;
    } catch (error) {
      if (attempt >= 20) throw error;
      execFileSync("sleep", ["0.05"]);
    }
  }
  const list = (text === "" || text === "null" ? [] : JSON.parse(text)) as { id: string; bundle: string }[];
  return list
    .filter((c) => roots.some((r) => c.bundle === r || c.bundle.startsWith(`${r}/`)))
    .map((c) => `${c.id} (${c.bundle})`);
}

/** Removes (kills and deletes) the containers runcContainers(roots) lists: a failed test's leftovers. */
export function removeRuncContainers(roots: string[]): void {
  for (const entry of runcContainers(roots)) {
    const id = entry.slice(0, entry.indexOf(" ("));
    try {
      execFileSync("runc", ["delete", "--force", id], { stdio: "ignore" });
    } catch {
      // Already gone between list and delete.
    }
  }
}

/** Polls `check` until it returns true or `limitMs` passes; returns the last result. */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  limitMs: number,
  everyMs = 100,
): Promise<boolean> {
  const end = Date.now() + limitMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= end) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * A suite's cluster teardown: the cluster's logs when a test of it failed, stopCluster, then
 * `cleanup` (what the suite made: containers, processes, dirs), also when stopping failed.
 */
export function stopClusterAfterAll(cleanup: () => void | Promise<void>): void {
  let failed = false;
  afterEach((ctx) => {
    if (ctx.task.result?.state === "fail") failed = true;
  });
  afterAll(async () => {
    if (failed) console.error(clusterLogs());
    try {
      await stopCluster();
    } finally {
      await cleanup();
    }
  });
}
