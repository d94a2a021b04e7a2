import { type ExecSpec, type NodeConf, type StepRecord, jobrtError } from "@jobrt/core";
import { findProgram } from "./conf.js";
import { type CreateStartSpec, PID_PLACEHOLDER, createStartArgv } from "./createstart.js";
import { expandCommand } from "./expand.js";
import type { StepState } from "./ocistepstate.js";
import { type PatternValues, expandPattern } from "./pattern.js";
import type { TaskState } from "./taskstate.js";
import type { WatchdogSpec } from "./watchdog.js";

/** The create/start task: createstart.pl, which runs its whole lifecycle (createstart.ts). */
export function supervisorExec(
  node: NodeConf,
  step: StepRecord,
  st: StepState,
  ts: TaskState,
  values: PatternValues,
  runtimeEnv: Record<string, string>,
): ExecSpec {
  const argv = createStartArgv(
    findProgram("perl", runtimeEnv.PATH) ?? findProgram("perl", undefined),
    watchdogSpec(st, values, ts.taskDir),
    createStartSpec(node, st, values),
  );
  if (!argv)
    throw jobrtError(
      "ERR_LAUNCH",
      {
        problem: `create/start mode needs perl (Debian's perl-base) on PATH and an architecture whose prctl number jobrt knows (this is ${process.arch}): one of them is missing; set RunTimeRun in ${st.conf.file} for run mode`,
      },
      { details: { runtime: "runtime/oci" } },
    );
  return { argv, env: runtimeEnv, cwd: step.cwd };
}

/**
 * The commands createstart.pl runs besides the watchdog's, `%p` left as a placeholder it fills
 * in; one that cannot be expanded is not run (Start: the task fails saying why).
 */
function createStartSpec(node: NodeConf, st: StepState, values: PatternValues): CreateStartSpec {
  const expand = (key: "RunTimeStart" | "RunTimeQuery" | "RunTimeKill" | "RunTimeDelete") => {
    try {
      return {
        command: expandPattern(st.conf.commands[key] as string, values, {
          shell: true,
          pidPlaceholder: PID_PLACEHOLDER,
        }),
      };
    } catch (error) {
      return { command: "", problem: (error as Error).message };
    }
  };
  const start = expand("RunTimeStart");
  return {
    start: start.command,
    startProblem: start.problem ?? "",
    query: expand("RunTimeQuery").command,
    kill: expand("RunTimeKill").command,
    delete: expand("RunTimeDelete").command,
    timeouts: { ...st.timeouts },
    graceMs: Math.min(Math.max(node.killWait * 500, 500), 10_000),
    verbose: st.verbose,
  };
}

/** The create/start watchdog's commands: Kill and Delete only if they expand without `%p`. */
function watchdogSpec(st: StepState, values: PatternValues, taskDir: string): WatchdogSpec {
  const orEmpty = (key: "RunTimeKill" | "RunTimeDelete") => {
    try {
      return expandCommand(st, key, values);
    } catch {
      return "";
    }
  };
  return {
    taskDir,
    create: expandCommand(st, "RunTimeCreate", values),
    kill: orEmpty("RunTimeKill"),
    delete: orEmpty("RunTimeDelete"),
  };
}
