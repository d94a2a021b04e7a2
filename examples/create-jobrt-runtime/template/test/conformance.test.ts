import { describeRuntimeConformance } from "@jobrt/testkit";

describeRuntimeConformance(() => import("../src/index.js"), {
  type: "__TYPE__",
  capabilities: { runs: "exec-spec" },
  // meta.capabilities has no "pmi-fd": the host refuses srun --mpi=pmi2 for it, and the kit checks
  // that it does. A runtime whose ExecSpec execs the task keeps the host's descriptors: declare
  // "pmi-fd" in src/index.ts and remove this line.
  mpi: { pmi2: { cannot: "the starter declares no pmi-fd capability" } },
  invalid: [{ title: "a container request", container: { value: "/some/image" }, code: "ERR_CONTAINER_REQUEST" }],
});
