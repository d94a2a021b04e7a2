import type { ClientInfo, Logger, NodeConf, RuntimeContext, StepRecord, TaskRecord } from "./types.js";

/**
 * What every step hook is given (API 2): one named object, so a new input is a new property and
 * never breaks a plugin. `log` is the host's logger for this step.
 */
export interface StepHookContext {
  node: NodeConf;
  step: StepRecord;
  log: Logger;
}

export interface InitContext {
  /** Where the runtime is loaded: `jobrt check` ("submit"), `jobrt gc` ("node"), a step host ("step"). */
  context: RuntimeContext;
}

export interface SetupContext extends StepHookContext {
  client: ClientInfo;
}

/** Contexts after setup carry the step state setup returned (undefined when it returned none). */
export interface StatefulContext<S> extends StepHookContext {
  /**
   * What setup returned, after a JSON round trip: the same value in every process of the step
   * (each `jobrt exec` task of a Slurm step, and `jobrt gc` after a crash).
   */
  state: S | undefined;
}

export interface TaskHookContext<S> extends StatefulContext<S> {
  task: TaskRecord;
}

export interface CleanupContext<S> extends StatefulContext<S> {
  /**
   * True when `jobrt gc` cleans up after a host that died: nothing of the step is in memory, the
   * tasks carry no pid or exit, and the host has already SIGKILLed what the step left running.
   */
  afterCrash: boolean;
}

export type ValidateContext = StepHookContext;

/** describe's input: the step state alone (it runs in the host, after setup, for the node log). Since core 2.1.0. */
export interface DescribeContext<S> {
  state: S | undefined;
}
/** What `tools` is given: the node (its conf dir names the runtime's own configuration). Since core 2.1.0. */
export interface ToolsContext {
  node: NodeConf;
  log: Logger;
}

/** `check` sees the step as `validate` does, on the node it runs on. Since core 2.1.0. */
export type CheckContext = StepHookContext;
