import type { ExecSpec, StepRecord, TaskRecord } from "@jobrt/core";
import type { SandboxState } from "./sandbox.js";

/** bwrap's exit status when it cannot exec the task's command (and a task's own exit 1). */
const BWRAP_EXEC_FAILED = 1;

/**
 * The task's command line: bwrap itself, the host its only supervisor (ExecSpec.supervise). bwrap
 * forwards no signal, and a SIGTERM to bwrap kills the whole sandbox at once (--die-with-parent):
 * the host signals the sandbox's session instead, the only child of bwrap (`stop: "child-group"`).
 * bwrap exits 1 when it cannot exec the command: the host then looks it up in the sandbox and
 * reports 127 or 126 when it is certainly missing (`missingCommand`).
 */
export function taskExecSpec(step: StepRecord, task: TaskRecord, state: SandboxState): ExecSpec {
  const env = { ...task.env };
  // --setenv of --container-env wins over the task's own variables, PATH included.
  for (let i = state.args.indexOf("--setenv"); i >= 0; i = state.args.indexOf("--setenv", i + 3))
    env[state.args[i + 1] as string] = state.args[i + 2] as string;
  return {
    argv: [state.bwrap, ...state.args, "--", ...task.argv],
    env: task.env,
    cwd: step.cwd,
    supervise: {
      stop: "child-group",
      missingCommand: {
        command: task.argv[0] ?? "",
        view: state.view,
        ...(env.PATH !== undefined ? { path: env.PATH } : {}),
        cwd: state.cwd,
        exitCodes: [BWRAP_EXEC_FAILED],
      },
    },
  };
}
