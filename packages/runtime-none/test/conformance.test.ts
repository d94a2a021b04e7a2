import { describeRuntimeConformance } from "@jobrt/testkit";
import plugin from "../src/index.js";

describeRuntimeConformance(plugin, {
  type: "runtime/none",
  capabilities: { runs: "not-supported" },
  // It accepts every request field and ignores it (README): the task starts in the step's cwd.
  skip: { "launch.workdir": "none accepts --container-workdir and ignores it, as every container option (README)" },
});
