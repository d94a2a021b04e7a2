import { NOT_SUPPORTED, isExecSpec } from "@jobrt/core";
import { type SuiteKit, fail } from "./suitekit.js";

/** What run returned for each task of the baseline step, and the shape of its ExecSpecs. */
export function registerBaselineChecks(kit: SuiteKit): void {
  kit.check("step.sequence", async () => {
    const b = await kit.baseline();
    if (b.results.length !== b.step.tasks.length)
      fail(`run answered ${b.results.length} of ${b.step.tasks.length} tasks`);
  });
  kit.check("run.result", async () => {
    const { results } = await kit.baseline();
    results.forEach((r, i) => {
      if (r !== NOT_SUPPORTED && !isExecSpec(r))
        fail(`task ${i}: run returned ${JSON.stringify(r)?.slice(0, 200)}, not an ExecSpec or NOT_SUPPORTED`);
      if (kit.caps.runs === "exec-spec" && r === NOT_SUPPORTED)
        fail(`task ${i}: run returned NOT_SUPPORTED, but capabilities.runs is "exec-spec"`);
      if (kit.caps.runs === "not-supported" && r !== NOT_SUPPORTED)
        fail(`task ${i}: run returned an ExecSpec, but capabilities.runs is "not-supported"`);
    });
  });
  const shapes = [
    ["execspec.argv", "argv"],
    ["execspec.env-cwd", "envCwd"],
    ["execspec.shell", "shell"],
    ["execspec.task-argv", "taskArgv"],
  ] as const;
  for (const [id, key] of shapes) {
    kit.check(id, async (ctx) => {
      const { problems } = await kit.execSpecs(ctx);
      if (problems[key].length > 0) fail(problems[key].join("; "));
    });
  }
}
