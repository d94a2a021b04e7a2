import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { removeTree } from "./tmp.js";

/**
 * vitest global setup, listed by every project: makes the run's temp dir (tests/helpers/tmp-setup.ts
 * makes one dir per test file in it) and at the end of the run fails it if anything is still there,
 * i.e. a file's dir was not removed (a mount below it, a worker that died, a process still writing).
 * Other runs on the machine have dirs of their own, so only this run's leftovers count.
 */
export default function setup(): (() => void) | undefined {
  // Every project of a root run calls this in the one main process: the first one owns the dir.
  const existing = process.env.JOBRT_TEST_RUN_TMP;
  if (existing && existsSync(existing)) return undefined;
  const run = mkdtempSync(join(tmpdir(), "jobrt-run-"));
  chmodSync(run, 0o755);
  process.env.JOBRT_TEST_RUN_TMP = run;
  return () => teardown(run);
}

export function teardown(run: string): void {
  if (process.env.JOBRT_KEEP_TMP === "1") {
    console.warn(`JOBRT_KEEP_TMP=1: kept ${run}`);
    return;
  }
  const leaked = readdirSync(run).map((name) => `${name} (${owner(join(run, name))})`);
  const left = removeTree(run);
  const problems = [...(leaked.length > 0 ? [`left by test files: ${leaked.join(", ")}`] : []), ...left];
  if (problems.length === 0) return;
  // vitest reports an error thrown here but still exits 0: the exit code makes the run fail.
  process.exitCode = 1;
  throw new Error(`temp dir leak check (${run}):\n  ${problems.join("\n  ")}`);
}

function owner(fileDir: string): string {
  try {
    return readFileSync(join(fileDir, ".test-file"), "utf8").trim();
  } catch {
    return "unknown test file";
  }
}
