import type { ExecSpec, NodeConf, StepRecord } from "@jobrt/core";
import { findProgram } from "./conf.js";
import { expandCommand } from "./expand.js";
import { type FastPathSpec, PID_PLACEHOLDER } from "./fastpath.js";
import type { StepState } from "./ocistepstate.js";
import { type PatternValues, expandPattern } from "./pattern.js";
import { SUPERVISOR_PROGRAM } from "./subreaper.js";
import type { SupervisorSpec } from "./supervisor.js";
import type { TaskState } from "./taskstate.js";
import { type WatchdogSpec, supervisorPrefix } from "./watchdog.js";

/** The create/start task: the supervisor behind its perl prefix (see watchdog.ts). */
export function supervisorExec(
  node: NodeConf,
  step: StepRecord,
  st: StepState,
  ts: TaskState,
  values: PatternValues,
  runtimeEnv: Record<string, string>,
): ExecSpec {
  const { conf } = st;
  const graceMs = Math.min(Math.max(node.killWait * 500, 500), 10_000);
  const spec: SupervisorSpec = {
    commands: {
      RunTimeCreate: conf.commands.RunTimeCreate as string,
      RunTimeStart: conf.commands.RunTimeStart as string,
      RunTimeQuery: conf.commands.RunTimeQuery as string,
      RunTimeKill: conf.commands.RunTimeKill as string,
      RunTimeDelete: conf.commands.RunTimeDelete as string,
    },
    values,
    timeouts: { ...st.timeouts },
    graceMs,
    taskDir: ts.taskDir,
    verbose: st.verbose,
  };
  // -vv: node narrates every command, so it runs the whole sequence.
  const fast = st.verbose ? undefined : fastPathSpec(st, values, spec);
  const prefix = supervisorPrefix(
    findProgram("perl", runtimeEnv.PATH) ?? findProgram("perl", undefined),
    watchdogSpec(st, values, ts.taskDir),
    fast,
  );
  if (!prefix)
    node.log(
      "warn",
      "runtime oci: perl not found: in create/start mode the container's exit status will not be available",
    );
  // The supervisor trusts these only from the perl prefix, never from the job's environment.
  const env = { ...runtimeEnv };
  delete env.JOBRT_OCI_SUBREAPER;
  delete env.JOBRT_OCI_WATCHDOG;
  delete env.JOBRT_OCI_RESUME;
  return { argv: [...(prefix ?? []), process.execPath, SUPERVISOR_PROGRAM, JSON.stringify(spec)], env, cwd: step.cwd };
}

/**
 * The fast path's commands (fastpath.ts), `%p` left as a placeholder it fills in; undefined when
 * Start or Query cannot be expanded (node's supervisor then runs the task and says why).
 */
function fastPathSpec(st: StepState, values: PatternValues, spec: SupervisorSpec): FastPathSpec | undefined {
  const expand = (key: "RunTimeStart" | "RunTimeQuery" | "RunTimeKill" | "RunTimeDelete") => {
    try {
      return expandPattern(st.conf.commands[key] as string, values, { shell: true, pidPlaceholder: PID_PLACEHOLDER });
    } catch {
      return undefined;
    }
  };
  const [start, query] = [expand("RunTimeStart"), expand("RunTimeQuery")];
  if (start === undefined || query === undefined) return undefined;
  const t = spec.timeouts;
  return {
    start,
    query,
    kill: expand("RunTimeKill") ?? "",
    delete: expand("RunTimeDelete") ?? "",
    timeouts: { create: t.create, start: t.start, query: t.query, delete: t.delete },
    graceMs: spec.graceMs,
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
  const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));
  return {
    taskDir,
    create: expandCommand(st, "RunTimeCreate", values),
    kill: orEmpty("RunTimeKill"),
    delete: orEmpty("RunTimeDelete"),
    killSeconds: seconds(st.timeouts.kill),
    deleteSeconds: seconds(st.timeouts.delete),
  };
}
