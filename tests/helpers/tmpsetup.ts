import { chmodSync, lstatSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect } from "vitest";
import { reap } from "./reap.js";
import { HANDED_OVER, removeTree } from "./tmp.js";

// Every vitest project lists this as a setup file, so it runs in the worker before each test file:
// the file's temp dirs (tempDir(), createTestNode(), the conformance suite) go into one dir of the
// file's own, made here below the run's dir (tests/helpers/tmprun.ts), and removed after the
// file's last afterAll. 1777 like /tmp: tests hand dirs below it to `nobody`, and a file whose
// worker drops root for good (tests/shifter/conformance.test.ts) still makes and removes its own.
const parent = process.env.JOBRT_TEST_RUN_TMP || tmpdir();
const mine = mkdtempSync(join(parent, parent === tmpdir() ? "jobrt-tmp-" : "f-"));
chmodSync(mine, 0o1777);
const owner = process.getuid?.();
writeFileSync(join(mine, ".test-file"), `${expect.getState().testPath ?? "?"}\n`);
process.env.JOBRT_TEST_TMP = mine;

// Processes the file's tests started inherit JOBRT_TEST_TMP: any still running now (a cell that
// did not end its long step, e.g. because an expectation failed first) is killed and fails the file.
afterAll(async () => {
  const stragglers = await reap("JOBRT_TEST_TMP", mine);
  const problems = stragglers.map((s) => `still running after the file's tests: ${s}`);
  if (process.env.JOBRT_KEEP_TMP === "1") console.warn(`JOBRT_KEEP_TMP=1: kept ${mine}`);
  else if (process.getuid?.() !== owner) problems.push(...handOver(mine));
  else problems.push(...removeTree(mine).map((p) => `temp dir left in place: ${p}`));
  if (problems.length > 0) throw new Error(`this test file left:\n  ${problems.join("\n  ")}`);
});

/**
 * The worker dropped root: it removes what is its own, and the run's teardown (root) the rest,
 * told by HANDED_OVER that this dir is expected.
 */
function handOver(dir: string): string[] {
  const problems: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (lstatSync(path).uid === process.getuid?.())
      problems.push(...removeTree(path).map((p) => `temp dir left in place: ${p}`));
  }
  writeFileSync(join(dir, HANDED_OVER), "");
  return problems;
}
