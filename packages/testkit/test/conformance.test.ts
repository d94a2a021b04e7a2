import { describeRuntimeConformance } from "../src/index.js";
import { hostEnvRuntime, passThrough } from "./fixtures/plugins.js";

// A conforming plugin passes every check, with real launches of what run returns.
describeRuntimeConformance(hostEnvRuntime(), {
  capabilities: { runs: "exec-spec" },
  invalid: [{ title: "unknown mode", container: { options: { mode: ["turbo"] } }, code: "ERR_CONTAINER_REQUEST" }],
});

// The loader form, as plugin authors write it: () => import("../src/index.js").
describeRuntimeConformance(async () => ({ default: hostEnvRuntime() }), {
  title: "runtime conformance: hostenv through a loader",
  capabilities: { runs: "exec-spec" },
  tasks: 2,
});

// A plugin that never runs anything itself: the host starts the task's own argv.
// It declares neither "pmi-fd" nor "pass-fds": the host must refuse --mpi=pmi2 for it.
describeRuntimeConformance(passThrough, {
  capabilities: { runs: "not-supported" },
  mpi: { pmi2: { cannot: "it declares no pmi-fd or pass-fds capability" } },
});

// As root, the same plugin for an unprivileged job user: launches drop to nobody like the host.
if (process.getuid?.() === 0) {
  describeRuntimeConformance(hostEnvRuntime(), {
    title: "runtime conformance: hostenv for job user nobody",
    capabilities: { runs: "exec-spec" },
    user: { uid: 65534, gid: 65534, name: "nobody" },
  });
}
