import {
  type JobrtError,
  type NodeConf,
  type RuntimeRegistry,
  type StepStateText,
  isJobrtError,
  jobrtError,
  messageOf,
} from "@jobrt/core";
import type { StepEvent } from "./events.js";
import type { PlannedComponent } from "./plan.js";
import type { StopControl } from "./task/stop.js";

/** What a step's per-component runtime hooks need from its session; `indexes` fills in as runtimes load. */
export interface ComponentHooks {
  registry: RuntimeRegistry;
  node: NodeConf;
  components: PlannedComponent[];
  indexes: number[];
  emit: (event: StepEvent) => void;
}

/** Resolves every runtime before any setup, so a bad name fails the step with nothing started. */
export async function loadRuntimes(hooks: ComponentHooks, stop: StopControl): Promise<boolean> {
  const { registry, node, components, indexes } = hooks;
  for (const [i, c] of components.entries()) {
    // A signal must not wait for a slow or hung plugin init (up to PluginInitTimeout).
    const index = await Promise.race([
      registry.load(c.record.runtime || undefined, "step"),
      stop.cancelled.then(() => undefined),
    ]);
    if (index === undefined) return false;
    const info = registry.info(index);
    c.record.runtime = info.name;
    for (const task of c.record.tasks) task.env.SLURM_RUNTIME = info.name;
    indexes.push(index);
    node.log(
      "verbose",
      `component ${i}: runtime ${info.type} (index ${index}) ${info.package ?? ""}@${info.version} ${info.path ?? ""}`,
    );
    hooks.emit({
      event: "runtime",
      component: i,
      index,
      type: info.type,
      package: info.package,
      version: info.version,
      path: info.path,
    });
  }
  return true;
}

/** Cleanup always, in reverse order, for every component whose setup was attempted. */
export async function cleanupComponents(
  hooks: ComponentHooks,
  setupTried: number[],
  states: StepStateText[],
  report: (error: JobrtError) => void,
): Promise<boolean> {
  const { registry, node, components, indexes } = hooks;
  let failed = false;
  for (const i of [...setupTried].reverse()) {
    const c = components[i]!;
    try {
      await registry.cleanup(indexes[i]!, { node, step: c.record, state: states[i] });
      hooks.emit({ event: "cleanup", component: i, runtime: c.record.runtime, ok: true });
    } catch (error) {
      failed = true;
      const e = isJobrtError(error)
        ? error
        : jobrtError(
            "ERR_RUNTIME_HOOK",
            { runtime: c.record.runtime, hook: "cleanup", reason: messageOf(error) },
            { cause: error },
          );
      report(e);
      hooks.emit({ event: "cleanup", component: i, runtime: c.record.runtime, ok: false, error: e.message });
    }
  }
  return failed;
}
