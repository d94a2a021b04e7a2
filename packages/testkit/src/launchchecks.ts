import { processGroupAlive } from "./processes.js";
import { type SuiteKit, fail } from "./suitekit.js";

/** Each task really runs (its marker printed), its exit code comes through, and nothing of it outlives cleanup. */
export function registerTaskLaunchChecks(kit: SuiteKit): void {
  if (!kit.launch) {
    for (const id of ["launch.tasks", "launch.exit-code", "launch.no-leftover-processes"] as const) {
      kit.check(id, (ctx) => ctx.skip("real-launch checks turned off (launch: false)"));
    }
    return;
  }
  kit.check("launch.tasks", async () => {
    const n = kit.node();
    const s = kit.step();
    try {
      kit.assertLaunched(s, await kit.launchAll(s, await kit.setupAndRun(n, s)));
    } finally {
      await kit.cleanup(n, s);
    }
  });
  kit.check("launch.exit-code", async () => {
    const n = kit.node();
    const s = kit.step({ tasks: 1, argv: ["sh", "-c", "exit 7"] });
    try {
      const [r] = await kit.launchAll(s, await kit.setupAndRun(n, s));
      if (r?.code !== 7)
        fail(`task exited with ${r?.code ?? r?.signal}, expected 7; stderr: ${r?.stderr.trim().slice(0, 300)}`);
    } finally {
      await kit.cleanup(n, s);
    }
  });
  kit.check("launch.no-leftover-processes", async () => {
    const n = kit.node();
    const s = kit.step({ tasks: 1 });
    try {
      kit.assertLaunched(s, await kit.launchAll(s, await kit.setupAndRun(n, s)));
    } finally {
      await kit.cleanup(n, s);
    }
    const pid = s.tasks[0]?.pid;
    if (pid === undefined) fail("the task has no pid after launch");
    if (processGroupAlive(pid)) fail(`process group ${pid} still has processes after cleanup`);
  });
}
