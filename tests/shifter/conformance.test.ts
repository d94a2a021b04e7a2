// The @jobrt/testkit conformance suite against @jobrt/runtime-shifter, launching through the
// Shifter stand-in. Shifter refuses to run as root and the testkit builds its steps for the user
// running the tests, so this file's worker (its own process: vitest's forks pool) builds the site
// as root and then drops to nobody for good before the suite runs.
import { execFileSync } from "node:child_process";
import { chownSync } from "node:fs";
import { isMainThread } from "node:worker_threads";
import { afterAll } from "vitest";
import { describeRuntimeConformance } from "../../packages/testkit/dist/index.js";
import { TASK_GID, TASK_UID, createStandinSite } from "./standin/layout.js";

// setuid in a worker thread would change the whole test process; only a forked worker may drop.
if (!isMainThread)
  throw new Error("tests/shifter/conformance.test.ts needs vitest's forks pool (it drops root for its own process)");
const site = createStandinSite();
site.addImage("docker:busybox:latest");
// Everything but udiRoot.conf (which Shifter wants root-owned) becomes nobody's, so the
// unprivileged worker can still remove the site afterwards.
execFileSync("chown", ["-R", `${TASK_UID}:${TASK_GID}`, site.root]);
chownSync(site.udiRootConf, 0, 0);
process.setgroups?.([TASK_GID]);
process.setgid?.(TASK_GID);
process.setuid?.(TASK_UID);
afterAll(() => site.remove());

describeRuntimeConformance(() => import("../../packages/runtime-shifter/dist/index.js"), {
  type: "runtime/shifter",
  capabilities: { runs: "either", container: "optional" },
  node: { confDir: site.confDir },
  container: { value: "docker:busybox:latest" },
  // It has neither "pmi-fd" nor "pass-fds": the host refuses --mpi=pmi2 for it (docs/mpi.md).
  mpi: { pmi2: { cannot: "shifter declares no pmi-fd or pass-fds capability" } },
  invalid: [
    { title: "image name Shifter would rewrite", container: { value: "docker:busy box" }, code: "ERR_CONTAINER_IMAGE" },
    { title: "image not on the gateway", container: { value: "docker:nothere:1" }, code: "ERR_CONTAINER_IMAGE" },
    { title: "volume target under /etc", container: { volumes: ["/home:/etc/x"] }, code: "ERR_CONTAINER_REQUEST" },
    {
      title: "two volumes in one value",
      container: { volumes: ["/home/a:/a;/home/b:/b"] },
      code: "ERR_CONTAINER_REQUEST",
    },
    { title: "env name not an identifier", container: { env: ["1BAD=x"] }, code: "ERR_CONTAINER_REQUEST" },
    { title: "relative workdir", container: { workdir: "work" }, code: "ERR_CONTAINER_REQUEST" },
    { title: "unknown module", container: { modules: ["nope"] }, code: "ERR_CONTAINER_REQUEST" },
    { title: "--container-opt", container: { options: { x: ["1"] } }, code: "ERR_CONTAINER_REQUEST" },
    {
      title: "options without an image",
      container: { volumes: ["/home/a:/a"] },
      step: (s) => {
        delete s.container?.value;
      },
      code: "ERR_CONTAINER_REQUEST",
    },
  ],
});
