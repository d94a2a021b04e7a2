import { type InvalidCase, describeRuntimeConformance } from "@jobrt/testkit";
import { afterAll, beforeAll } from "vitest";
import { makeBusyboxRootfs } from "./rootfs.js";

const invalid: InvalidCase[] = [
  { title: "a relative rootfs", container: { value: "images/x" }, code: "ERR_CONTAINER_IMAGE" },
  { title: "a missing rootfs", container: { value: "/nonexistent/rootfs" }, code: "ERR_CONTAINER_IMAGE" },
  { title: "a relative workdir", container: { workdir: "work" }, code: "ERR_CONTAINER_REQUEST" },
  { title: "a volume whose source is missing", container: { volumes: ["/nonexistent:/mnt"] }, code: "ERR_CONTAINER_REQUEST" },
  { title: "an env entry without =", container: { env: ["JUSTANAME"] }, code: "ERR_CONTAINER_REQUEST" },
  { title: "a module (not accepted)", container: { modules: ["gpu"] }, code: "ERR_CONTAINER_REQUEST" },
];

// bwrap declares no pmi-fd or pass-fds capability: the host refuses --mpi=pmi2 (docs/mpi.md).
const pmi2 = { cannot: "bwrap declares no pmi-fd or pass-fds capability" };
// Without --container there is no request to carry the host's binds: the sandbox's /tmp is its own.
const hostTree = {
  pmi2,
  pmix: { cannot: "without --container the host binds no PMIx directory into the sandbox, whose /tmp is its own" },
};

// Without --container the sandbox is the host's tree, read-only, and the task keeps its cwd.
describeRuntimeConformance(() => import("../src/index.js"), {
  title: "runtime/bwrap on the host's tree",
  type: "runtime/bwrap",
  capabilities: { runs: "exec-spec" },
  invalid,
  mpi: hostTree,
});

// As root, the usual production case as well: a root host, an ordinary job user.
if (process.getuid?.() === 0) {
  describeRuntimeConformance(() => import("../src/index.js"), {
    title: "runtime/bwrap on the host's tree, job user nobody",
    type: "runtime/bwrap",
    capabilities: { runs: "exec-spec" },
    user: { uid: 65534, gid: 65534, name: "nobody" },
    invalid,
    mpi: hostTree,
  });
}

// With --container ROOTFS: a busybox tree, which does not hold the host's cwd, so tasks start at /.
let rootfs: { dir: string; dispose(): void } | undefined;
beforeAll(() => {
  rootfs = makeBusyboxRootfs();
});
afterAll(() => rootfs?.dispose());

describeRuntimeConformance(() => import("../src/index.js"), {
  title: "runtime/bwrap in a busybox rootfs",
  type: "runtime/bwrap",
  capabilities: { runs: "exec-spec" },
  container: () => ({ value: rootfs?.dir ?? "/rootfs-not-built" }),
  launch: { cwd: () => "/" },
  invalid,
  mpi: { pmi2 },
});
