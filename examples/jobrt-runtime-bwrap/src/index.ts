import { definePlugin, jobrtError, packageVersion } from "@jobrt/core";
import { taskExecSpec } from "./command.js";
import { type SandboxState, planSandbox } from "./sandbox.js";

export type { SandboxState } from "./sandbox.js";

export default definePlugin<SandboxState>(
  {
    name: "bwrap",
    type: "runtime/bwrap",
    version: packageVersion(import.meta.url),
    capabilities: ["container"],
    // --container is optional: without it the sandbox is the host's own tree, read-only.
    accepts: ["value", "volumes", "env", "workdir", "devices"],
  },
  {
    validate({ step }) {
      planSandbox(step, process.env.PATH);
    },
    setup({ step, log }) {
      const state = planSandbox(step, process.env.PATH);
      log("verbose", `bwrap: step ${step.jobId}.${step.stepId}: ${state.bwrap} ${state.args.join(" ")}`);
      if (state.devicesSkipped)
        log(
          "info",
          `bwrap: step ${step.jobId}.${step.stepId}: CDI edits bwrap cannot apply: ${state.devicesSkipped.join("; ")} (docs/devices.md)`,
        );
      return state;
    },
    run({ step, task, state }) {
      if (!state) throw jobrtError("ERR_RUNTIME_CONTRACT", { problem: "bwrap: run called before setup" });
      return taskExecSpec(step, task, state);
    },
    cleanup() {
      // Nothing to remove: the sandbox lives in the tasks' own processes (tmpfs /tmp included),
      // and setup starts nothing and writes nothing.
    },
  },
);
