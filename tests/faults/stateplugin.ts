import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot, tempDir } from "../helpers/jobrt.js";

/**
 * A real API 2 runtime package, `jobrt-runtime-statecheck`, in a PluginDir of its own. setup
 * returns a step state naming the process that ran it; every hook appends one JSON line to
 * $STATECHECK_LOG (jobrt's environment) with its hook name, its process and the state it got.
 * run hands the task's own argv back as an ExecSpec whose `signals` is $STATECHECK_SIGNALS.
 */
export function statePluginDir(): string {
  const dir = tempDir("jobrt-state-plugins-");
  const pkg = join(dir, "node_modules", "jobrt-runtime-statecheck");
  mkdirSync(pkg, { recursive: true });
  const core = new URL(`file://${join(repoRoot, "packages/core/dist/index.js")}`).href;
  writeFileSync(
    join(pkg, "package.json"),
    JSON.stringify({ name: "jobrt-runtime-statecheck", version: "0.0.1", type: "module", exports: "./index.js" }),
  );
  writeFileSync(
    join(pkg, "index.js"),
    `import { appendFileSync } from "node:fs";
import { definePlugin } from ${JSON.stringify(core)};
const log = (entry) => process.env.STATECHECK_LOG && appendFileSync(process.env.STATECHECK_LOG, JSON.stringify({ pid: process.pid, ...entry }) + "\\n");
export default definePlugin({ name: "statecheck", type: "runtime/statecheck", version: "0.0.1", accepts: [] }, {
  setup({ step }) {
    const state = { setupPid: process.pid, job: step.jobId, nonce: Math.random().toString(36).slice(2), nested: { list: [1, "two", null] } };
    log({ hook: "setup", returned: state });
    return state;
  },
  taskInit({ task, state }) { log({ hook: "taskInit", task: task.globalId, state }); },
  run({ step, task, state }) {
    log({ hook: "run", task: task.globalId, state });
    return { argv: task.argv, env: task.env, cwd: step.cwd, signals: process.env.STATECHECK_SIGNALS || "group" };
  },
  cleanup({ state, afterCrash }) { log({ hook: "cleanup", state, afterCrash }); },
});
`,
  );
  return dir;
}
