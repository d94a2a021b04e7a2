import type { TaskRecord } from "@jobrt/core";
import { join } from "node:path";
import { filterEnvRecord } from "./env.js";
import type { StepState } from "./ocistepstate.js";
import type { PatternValues } from "./pattern.js";

/** One task of the step as run and cleanup work on it: its dir and what its runtime commands get. */
export interface TaskState {
  task: TaskRecord;
  taskDir: string;
  /** Pattern values used for this task's commands (pid filled in when known). */
  values: PatternValues;
  runtimeEnv: Record<string, string>;
  /** Set by teardown: the container's cgroup dirs that could not be removed (one line). */
  cgroupsLeft?: string;
}

/** A task's pattern values and the environment its runtime commands get (run and cleanup alike). */
export function commandContext(
  st: StepState,
  task: TaskRecord,
  taskDir: string,
): { values: PatternValues; runtimeEnv: Record<string, string> } {
  const values: PatternValues = { ...st.base, taskId: task.localId, envFile: join(taskDir, "environment") };
  if (st.conf.ignoreFileConfigJson) {
    values.bundle = st.bundle;
    values.argv = task.argv;
  } else {
    values.bundle = taskDir;
    values.argv = [];
  }
  return { values, runtimeEnv: filterEnvRecord(task.env, st.conf.runTimeEnvExclude) };
}
