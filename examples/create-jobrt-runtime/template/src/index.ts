import { type ExecSpec, type StepRecord, definePlugin, jobrtError, packageVersion } from "@jobrt/core";

/** What setup learned about a step. Per-step state lives in a WeakMap, never in module globals. */
interface StepState {
  label: string;
}
const steps = new WeakMap<StepRecord, StepState>();

function checkRequest(step: StepRecord): void {
  // This starter runs tasks on the host, so a container request is refused rather than ignored.
  if (step.container?.value !== undefined) {
    throw jobrtError("ERR_CONTAINER_REQUEST", { problem: `--container ${JSON.stringify(step.container.value)}: runtime __NAME__ does not run containers` });
  }
}

export default definePlugin(
  { name: "__NAME__", type: "__TYPE__", version: packageVersion(import.meta.url), capabilities: [] },
  {
    validate(_node, step) {
      checkRequest(step);
    },
    setup(node, step) {
      checkRequest(step);
      steps.set(step, { label: `${step.jobId}.${step.stepId}` });
      node.log("verbose", `__NAME__: set up step ${step.jobId}.${step.stepId}`);
    },
    run(_node, step, task): ExecSpec {
      const state = steps.get(step);
      if (!state) throw jobrtError("ERR_RUNTIME_CONTRACT", { problem: "__NAME__: run called before setup" });
      // Replace this with your runtime's command line; argv[0] must be absolute or on PATH.
      return { argv: ["/usr/bin/env", `JOBRT_RUNTIME_STEP=${state.label}`, ...task.argv], env: task.env, cwd: step.cwd };
    },
    cleanup(_node, step) {
      // Must never throw for leftovers: it also runs after a failed setup, and twice.
      steps.delete(step);
    },
  },
);
