import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { reap } from "./reap.js";
import { removeTree } from "./tmp.js";

/**
 * vitest global setup, listed by every project: makes the run's temp dir (tests/helpers/tmp-setup.ts
 * makes one dir per test file in it) and at the end of the run fails it if anything is still there,
 * i.e. a file's dir was not removed (a mount below it, a worker that died, a process still writing).
 * Other runs on the machine have dirs of their own, so only this run's leftovers count.
 */
export default function setup(): (() => Promise<void>) | undefined {
  // Every project of a root run calls this in the one main process: the first one owns the dir.
  const existing = process.env.JOBRT_TEST_RUN_TMP;
  if (existing && existsSync(existing)) return undefined;
  const run = mkdtempSync(join(tmpdir(), "jobrt-run-"));
  chmodSync(run, 0o755);
  process.env.JOBRT_TEST_RUN_TMP = run;
  return () => teardown(run);
}

export async function teardown(run: string): Promise<void> {
  // Every process of the run inherits JOBRT_TEST_RUN_TMP; vitest's own workers (children of this
  // process) are spared. This catches what a file's afterAll could not: a worker that was killed.
  const stragglers = await reap("JOBRT_TEST_RUN_TMP", run, (p) => p.ppid === process.pid);
  const problems = stragglers.map((s) => `still running at the end of the run: ${s}`);
  if (process.env.JOBRT_KEEP_TMP === "1") {
    console.warn(`JOBRT_KEEP_TMP=1: kept ${run}`);
  } else {
    const leaked = readdirSync(run).map((name) => `${name} (${owner(join(run, name))})`);
    if (leaked.length > 0) problems.push(`left by test files: ${leaked.join(", ")}`);
    problems.push(...removeTree(run));
  }
  if (problems.length === 0) return;
  // vitest reports an error thrown here but still exits 0: the exit code makes the run fail.
  process.exitCode = 1;
  throw new Error(`leak check (${run}):\n  ${problems.join("\n  ")}`);
}

function owner(fileDir: string): string {
  try {
    return readFileSync(join(fileDir, ".test-file"), "utf8").trim();
  } catch {
    return "unknown test file";
  }
}
