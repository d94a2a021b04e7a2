import {
  type CheckFinding,
  type ClientInfo,
  type ExecSpec,
  type NodeConf,
  type NotSupported,
  type RuntimeContext,
  type RuntimePlugin,
  type RuntimeTool,
  type StepRecord,
  type StepStateText,
  type TaskRecord,
  checkAccepted,
  checkDevicesAccepted,
  serializeStepState,
} from "@jobrt/core";

/** Calls a plugin's hooks the way jobrt's host does, one step at a time. */
export interface PluginHost {
  init(context?: RuntimeContext): Promise<void>;
  /** Refuses fields outside `meta.accepts`, runs setup, keeps its state (as JSON text) for the step. */
  setup(node: NodeConf, step: StepRecord, client?: ClientInfo): Promise<StepStateText>;
  taskInit(node: NodeConf, step: StepRecord, task: TaskRecord): Promise<void>;
  run(node: NodeConf, step: StepRecord, task: TaskRecord): Promise<ExecSpec | NotSupported>;
  /** `afterCrash`: as `jobrt gc` calls it after the host died (tasks without pid or exit). */
  cleanup(node: NodeConf, step: StepRecord, options?: { afterCrash?: boolean; state?: StepStateText }): Promise<void>;
  validate(node: NodeConf, step: StepRecord): Promise<void>;
  /** The plugin's `tools` answer; undefined when it has no such hook. */
  tools(node: NodeConf): Promise<RuntimeTool[] | undefined>;
  /** The plugin's `check` answer for a request (refused first outside `meta.accepts`); undefined without the hook. */
  check(node: NodeConf, step: StepRecord): Promise<CheckFinding[] | undefined>;
  /** The state setup returned for `step` (JSON text), as the host journals it. */
  stateOf(step: StepRecord): StepStateText;
}

/**
 * Drives `plugin` as the host does: the request checked against `meta.accepts`, setup's state
 * journaled as JSON and handed to every later hook as a fresh parsed copy, so a plugin that keeps
 * anything in the state that JSON cannot carry fails here as it would under `jobrt exec`.
 */
export function pluginHost(plugin: RuntimePlugin): PluginHost {
  const states = new WeakMap<StepRecord, StepStateText>();
  const type = plugin.meta.type;
  const base = (node: NodeConf, step: StepRecord) => ({ node, step, log: node.log });
  const stateOf = (step: StepRecord): unknown => {
    const text = states.get(step);
    return text === undefined ? undefined : JSON.parse(text);
  };
  return {
    async init(context = "step") {
      await plugin.init({ context });
    },
    async setup(node, step, client = { verbose: 0 }) {
      checkAccepted(type, plugin.meta.accepts ?? [], step.container);
      checkDevicesAccepted(type, plugin.meta.accepts ?? [], step.container);
      const text = serializeStepState(type, await plugin.setup({ ...base(node, step), client }));
      states.set(step, text);
      return text;
    },
    async taskInit(node, step, task) {
      await plugin.taskInit({ ...base(node, step), task, state: stateOf(step) });
    },
    async run(node, step, task) {
      return plugin.run({ ...base(node, step), task, state: stateOf(step) });
    },
    async cleanup(node, step, options = {}) {
      const state = options.state !== undefined ? JSON.parse(options.state) : stateOf(step);
      await plugin.cleanup({ ...base(node, step), state, afterCrash: options.afterCrash ?? false });
    },
    async validate(node, step) {
      checkAccepted(type, plugin.meta.accepts ?? [], step.container);
      await plugin.validate?.(base(node, step));
    },
    async tools(node) {
      return plugin.tools?.({ node, log: node.log });
    },
    async check(node, step) {
      checkAccepted(type, plugin.meta.accepts ?? [], step.container);
      return plugin.check?.(base(node, step));
    },
    stateOf: (step) => states.get(step),
  };
}
