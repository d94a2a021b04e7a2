import { type SpawnOptions, spawn } from "node:child_process";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll } from "vitest";
import { tempDir } from "./tmp.js";

export { tempDir };

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** The built CLI entry; tests run it with the same node as the test runner. */
export const jobrtBin = join(repoRoot, "packages/cli/dist/bin.js");
/** The `jobrt` command as installed (package.json "bin"): the entry that runs bin.js (docs/node-step.md). */
export const jobrtEntry = join(repoRoot, "packages/cli/dist/jobrt");

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions extends SpawnOptions {
  input?: string;
  /** Kill the process after this many ms (the test then sees signal SIGKILL). */
  timeoutMs?: number;
}

/** Runs a program to completion and collects its output. */
export function runProgram(argv: string[], options: RunOptions = {}): Promise<RunResult> {
  const { input, timeoutMs = 60_000, ...spawnOptions } = options;
  return new Promise((resolvePromise, reject) => {
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: ["pipe", "pipe", "pipe"], ...spawnOptions });
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr?.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
    else child.stdin?.end();
  });
}

/**
 * Runs the built `jobrt` with `args`. Pass env to override; JOBRT_CONF_DIR defaults to an empty dir
 * (the embedded defaults), except that root's SpoolDir is the tests' own, never the machine's
 * /var/spool/jobrt: a test touches only what it made, and a jobrt of the local Slurm's second node
 * (another host name, the same disk) cannot claim the spool every other root test then uses.
 */
export function jobrt(args: string[], options: RunOptions = {}): Promise<RunResult> {
  if (!existsSync(jobrtBin)) throw new Error(`${jobrtBin} is missing: build first (pnpm turbo run build)`);
  const asRoot = (options.uid ?? process.getuid?.() ?? 0) === 0;
  const env = { ...process.env, JOBRT_CONF_DIR: asRoot ? rootConfDir() : emptyConfDir(), ...(options.env ?? {}) };
  // "--": Node 20 would otherwise read --env-file=... from the job's argv (as the bin's shebang does).
  return runProgram([process.execPath, "--", jobrtBin, ...args], { ...options, env });
}

let emptyDir: string | undefined;
function emptyConfDir(): string {
  if (emptyDir === undefined || !existsSync(emptyDir)) emptyDir = tempDir("jobrt-noconf-");
  return emptyDir;
}

let rootDir: string | undefined;
/** A jobrt.conf with only SpoolDir: the tests' own, one per host name (%h). */
function rootConfDir(): string {
  if (rootDir === undefined || !existsSync(rootDir)) {
    const dir = tempDir("jobrt-rootconf-");
    writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool", "%h")}\n`);
    rootDir = dir;
  }
  return rootDir;
}

/** The node name jobrt uses without NodeName in jobrt.conf: the short host name. */
export const nodeName = hostname().split(".")[0] ?? "localhost";

/** srun's per-task failure line that `jobrt run` prints after the step (docs/cli.md, "Failure lines"). */
export function failureLine(tasks: string, what: string, node = nodeName): string {
  return `jobrt: error: ${node}: ${tasks}: ${what}\n`;
}

/**
 * A describe block's prerequisites: a missing one fails every test of the block with a line naming
 * it. Tests never skip for a missing tool: scripts/system-deps.sh installs what they need.
 */
export function requires(what: Record<string, boolean>): void {
  beforeAll(() => {
    const missing = Object.entries(what)
      .filter(([, ok]) => !ok)
      .map(([name]) => name);
    if (missing.length > 0)
      throw new Error(
        `missing prerequisite: ${missing.join(", ")} (scripts/system-deps.sh and a build provide them; tests never skip)`,
      );
  });
}

/**
 * SIGKILLs `jobrt exec` process `pid` after its own children (its task forker), as when Slurm kills
 * jobrt and its forker alike: what the step left then waits for `jobrt gc`. (A `jobrt exec` killed
 * alone has its forker run that gc at once: docs/slurm.md, section 2.1.)
 */
export function killExecWithForker(pid: number): void {
  // Stopped first: a jobrt that saw its forker die would stop its tasks itself.
  process.kill(pid, "SIGSTOP");
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (Number(readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]!.split(" ")[1]) === pid)
        process.kill(Number(entry), "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  process.kill(pid, "SIGKILL");
}
