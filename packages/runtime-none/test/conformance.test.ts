import { describeRuntimeConformance } from "@jobrt/testkit";
import plugin from "../src/index.js";

describeRuntimeConformance(plugin, {
  type: "runtime/none",
  capabilities: { runs: "not-supported" },
});
