import { existsSync } from "node:fs";
import { isAbsolute } from "node:path";
import { NOT_SUPPORTED, type StepRecord } from "@jobrt/core";
import { uniqueJobId } from "./fixtures.js";
import { type RunResult, type SuiteKit, fail, listTree } from "./suitekit.js";

/** Absolute paths a spec names (argv entries, `--opt=/path` values, cwd) that exist right now. */
function existingPaths(specs: readonly RunResult[]): string[] {
  const out = new Set<string>();
  for (const r of specs) {
    if (r === NOT_SUPPORTED) continue;
    for (const arg of [...r.argv, r.cwd]) {
      for (const p of [arg, arg.slice(arg.indexOf("=") + 1)]) if (isAbsolute(p) && existsSync(p)) out.add(p);
    }
  }
  return [...out];
}

/** cleanup in every order a host may call it, and nothing of a step left in SpoolDir after it. */
export function registerCleanupOrderChecks(kit: SuiteKit): void {
  kit.check("cleanup.without-setup", async () => {
    const n = kit.node();
    const before = listTree(n.spoolDir);
    await kit.cleanup(n, kit.step());
    kit.assertNoLeftovers(n, before, "cleanup without setup");
  });
  kit.check("cleanup.after-failed-start", async () => {
    const n = kit.node();
    const before = listTree(n.spoolDir);
    const s = kit.step();
    await kit.hook("setup", () => kit.host().setup(n, s));
    await kit.cleanup(n, s);
    kit.assertNoLeftovers(n, before, "cleanup after setup only");
  });
  kit.check("cleanup.twice", async () => {
    const n = kit.node();
    const s = kit.step();
    await kit.setupAndRun(n, s);
    await kit.cleanup(n, s);
    await kit.hook("second cleanup", () => kit.host().cleanup(n, s));
  });
  kit.check("cleanup.leftovers", async () => {
    const n = kit.node();
    const before = listTree(n.spoolDir);
    const s = kit.step();
    const results = await kit.setupAndRun(n, s);
    if (kit.launch) await kit.launchAll(s, results);
    await kit.cleanup(n, s);
    kit.assertNoLeftovers(n, before, "after a full step");
  });
}

/** Two steps at once, and one step split over two records (as under srun): no shared state. */
export function registerStateChecks(kit: SuiteKit): void {
  kit.check("state.concurrent-steps", () => concurrentSteps(kit));
  kit.check("state.split-step", async () => {
    const n = kit.node();
    const before = listTree(n.spoolDir);
    const jobId = uniqueJobId();
    const cwd = kit.tempDir("cwd");
    const r0 = kit.step({ jobId, tasks: [0], totalTasks: 2, cwd });
    const r1 = kit.step({ jobId, tasks: [1], totalTasks: 2, cwd });
    try {
      const [res0, res1] = await Promise.all([kit.setupAndRun(n, r0), kit.setupAndRun(n, r1)]);
      if (kit.launch) kit.assertLaunched(r0, await kit.launchAll(r0, res0));
      const needed = existingPaths(res1);
      await kit.cleanup(n, r0);
      const gone = needed.filter((p) => !existsSync(p));
      if (gone.length > 0) fail(`cleanup of task 0's record removed ${gone.join(", ")}, which task 1's ExecSpec uses`);
      if (kit.launch) kit.assertLaunched(r1, await kit.launchAll(r1, res1));
    } finally {
      await kit.cleanup(n, r0);
      await kit.cleanup(n, r1);
    }
    kit.assertNoLeftovers(n, before, "after both records of the split step");
  });
}

async function concurrentSteps(kit: SuiteKit): Promise<void> {
  const n = kit.node();
  const before = listTree(n.spoolDir);
  const ja = uniqueJobId();
  const jb = uniqueJobId();
  const a = kit.step({ jobId: ja, env: { JOBRT_TESTKIT_MARK: `jobrt-testkit-mark-a${ja}` } });
  const b = kit.step({ jobId: jb, env: { JOBRT_TESTKIT_MARK: `jobrt-testkit-mark-b${jb}` } });
  await Promise.all([
    kit.hook("setup(A)", () => kit.host().setup(n, a)),
    kit.hook("setup(B)", () => kit.host().setup(n, b)),
  ]);
  const run = async (s: StepRecord) => {
    await Promise.all(s.tasks.map((t) => kit.hook("taskInit", () => kit.host().taskInit(n, s, t))));
    return Promise.all(s.tasks.map((t) => kit.hook("run", () => kit.host().run(n, s, t))));
  };
  try {
    const ra = await run(a);
    const rbEarly = await run(b);
    const needed = existingPaths(rbEarly);
    await kit.cleanup(n, a);
    const gone = needed.filter((p) => !existsSync(p));
    if (gone.length > 0) fail(`cleanup of step A removed ${gone.join(", ")}, which step B's ExecSpec uses`);
    const leak = (results: RunResult[], other: StepRecord, label: string) => {
      const text = JSON.stringify(results.filter((r) => r !== NOT_SUPPORTED));
      for (const marker of [other.env.JOBRT_TESTKIT_MARK as string, other.cwd]) {
        if (text.includes(marker)) fail(`step ${label}'s ExecSpec mentions ${marker}, which belongs to the other step`);
      }
    };
    leak(ra, b, "A");
    leak(rbEarly, a, "B");
    if (kit.launch) kit.assertLaunched(b, await kit.launchAll(b, rbEarly));
  } finally {
    await kit.cleanup(n, a);
    await kit.cleanup(n, b);
  }
  kit.assertNoLeftovers(n, before, "after two concurrent steps");
}
