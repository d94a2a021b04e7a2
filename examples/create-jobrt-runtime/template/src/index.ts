import { type ExecSpec, definePlugin, jobrtError, packageVersion } from "@jobrt/core";

/**
 * What setup learned about a step. setup returns it; the host journals it (as JSON) and hands it
 * to taskInit, run and cleanup in every process of the step, and to cleanup in `jobrt gc` after a
 * crash. Keep it plain JSON data, and keep nothing per step anywhere else.
 */
interface StepState {
  label: string;
}

export default definePlugin<StepState>(
  // This starter runs tasks on the host: it accepts no container request field, so the host
  // refuses `--container` and the other container options for it, with one message.
  { name: "__NAME__", type: "__TYPE__", version: packageVersion(import.meta.url), capabilities: [], accepts: [] },
  {
    setup({ step, log }) {
      log("verbose", `__NAME__: set up step ${step.jobId}.${step.stepId}`);
      return { label: `${step.jobId}.${step.stepId}` };
    },
    run({ step, task, state }): ExecSpec {
      if (!state) throw jobrtError("ERR_RUNTIME_CONTRACT", { problem: "__NAME__: run called before setup" });
      // Replace this with your runtime's command line; argv[0] must be absolute or on PATH.
      return { argv: ["/usr/bin/env", `JOBRT_RUNTIME_STEP=${state.label}`, ...task.argv], env: task.env, cwd: step.cwd };
    },
    cleanup() {
      // Must never throw for leftovers: it also runs after a failed setup (state undefined), twice,
      // and in `jobrt gc` after a crash (afterCrash true).
    },
  },
);
