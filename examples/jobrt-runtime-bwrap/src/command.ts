import { fileURLToPath } from "node:url";
import type { ExecSpec, StepRecord, TaskRecord } from "@jobrt/core";
import type { SandboxState } from "./sandbox.js";

/** Same path from src/ (tests) and dist/ (the published package). */
const FORWARDER = fileURLToPath(new URL("../lib/forward.mjs", import.meta.url));

/**
 * The task's command line: node runs the forwarder, which runs bwrap and passes SIGINT/SIGTERM
 * to the sandbox's own session. bwrap forwards no signal, and a SIGTERM to bwrap kills the whole
 * sandbox at once (--die-with-parent), so the host signals only the forwarder (`signals: "leader"`).
 */
export function taskExecSpec(step: StepRecord, task: TaskRecord, state: SandboxState): ExecSpec {
  const command = task.argv[0] ?? "";
  // env takes a first operand with "=" for a variable: such a command goes to bwrap directly.
  const shim = command.includes("=") ? [] : [state.envShim, "--"];
  const env = { ...task.env };
  // The forwarder is node: the job's NODE_OPTIONS is for the job's own node programs.
  if (env.NODE_OPTIONS !== undefined) {
    env.JOBRT_BWRAP_NODE_OPTIONS = env.NODE_OPTIONS;
    delete env.NODE_OPTIONS;
  }
  return {
    argv: [process.execPath, FORWARDER, state.bwrap, ...state.args, "--", ...shim, ...task.argv],
    env,
    cwd: step.cwd,
    signals: "leader",
  };
}
