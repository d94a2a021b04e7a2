import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Straggler, reap, reapNow } from "./reap.js";
import { HANDED_OVER, removeTree } from "./tmp.js";

/**
 * vitest global setup, listed by every project: makes the run's temp dir (tests/helpers/tmpsetup.ts
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
  let tornDown = false;
  // An interrupted run (Ctrl-C) exits without the teardown: the same cleanup then runs on exit.
  process.once("exit", () => {
    if (tornDown) return;
    // A second Ctrl-C must not cut the cleanup short (vitest's own handler was a `once`).
    for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => {});
    const problems = cleanUp(run, reapNow("JOBRT_TEST_RUN_TMP", run, isWorker));
    if (problems.length > 0) console.error(describeLeaks(run, problems));
  });
  return async () => {
    tornDown = true;
    const problems = cleanUp(run, await reap("JOBRT_TEST_RUN_TMP", run, isWorker));
    if (problems.length === 0) return;
    // vitest reports an error thrown here but still exits 0: the exit code makes the run fail.
    process.exitCode = 1;
    throw new Error(describeLeaks(run, problems));
  };
}

// Every process of the run inherits JOBRT_TEST_RUN_TMP, so reaping by it catches what a file's
// afterAll could not (a worker that was killed); vitest's own workers (this process's children) are
// spared.
const isWorker = (p: Straggler): boolean => p.ppid === process.pid;

/** Removes the run's dir after its processes were reaped; returns what it found, one line each. */
function cleanUp(run: string, stragglers: string[]): string[] {
  const problems = stragglers.map((s) => `still running at the end of the run: ${s}`);
  if (process.env.JOBRT_KEEP_TMP === "1") {
    console.warn(`JOBRT_KEEP_TMP=1: kept ${run}`);
  } else if (existsSync(run)) {
    const leaked = readdirSync(run)
      .filter((name) => !existsSync(join(run, name, HANDED_OVER)))
      .map((name) => `${name} (${owner(join(run, name))})`);
    if (leaked.length > 0) problems.push(`left by test files: ${leaked.join(", ")}`);
    problems.push(...removeTree(run));
  }
  return problems;
}

function describeLeaks(run: string, problems: string[]): string {
  return `leak check (${run}):\n  ${problems.join("\n  ")}`;
}

function owner(fileDir: string): string {
  try {
    return readFileSync(join(fileDir, ".test-file"), "utf8").trim();
  } catch {
    return "unknown test file";
  }
}
