import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describeRuntimeConformance } from "@jobrt/testkit";
import { beforeAll, expect } from "vitest";
import { createStartConf, haveRunc, isRoot, makeBundle, writeConf } from "./fixtures.js";
import { tempDir } from "./host.js";

let bundle = "";
let createStartDir = "";
const embeddedDir = tempDir();
beforeAll(() => {
  // Never skipped: without runc or root the launch checks fail here, loudly (scripts/system-deps.sh).
  expect(haveRunc, "runc is installed").toBe(true);
  expect(isRoot, "these checks run as root").toBe(true);
  bundle = makeBundle(join(tempDir(), "bundle"));
  createStartDir = writeConf(tempDir(), createStartConf());
});

// The launch checks need runc and root (runc's default state dir). A task starts in the bundle's process.cwd (or --container-workdir), as
// under Slurm: the bundle's rootfs does not hold the job's cwd (docs/runtime-oci.md, WorkingDir).
const bundleCwd = (): string =>
  (JSON.parse(readFileSync(join(bundle, "config.json"), "utf8")) as { process: { cwd: string } }).process.cwd;
const launch = { cwd: bundleCwd };

describeRuntimeConformance(() => import("../src/index.js"), {
  title: "runtime conformance: oci, embedded runc run mode",
  type: "runtime/oci",
  // The embedded default runs `runc run` as argv, no shell (site oci.conf commands use /bin/sh -c).
  capabilities: { runs: "either", shell: false, container: "optional" },
  container: () => (bundle ? { value: bundle } : undefined),
  node: () => ({ confDir: embeddedDir }),
  launch,
  skip: {
    "execspec.task-argv":
      "config.json mode: the task argv becomes process.args of the task's config.json; the ExecSpec runs `runc run` on that bundle",
  },
  invalid: [
    { title: "missing bundle", container: { value: "/nonexistent/jobrt-bundle" }, code: "ERR_CONTAINER_REQUEST" },
    { title: "modules", container: { modules: ["mpich"] }, code: "ERR_CONTAINER_REQUEST" },
    { title: "unknown --container-opt", container: { options: { turbo: ["yes"] } }, code: "ERR_CONTAINER_REQUEST" },
    { title: "bad env entry", container: { env: ["1BAD=x"] }, code: "ERR_CONTAINER_REQUEST" },
    { title: "relative workdir", container: { workdir: "work" }, code: "ERR_CONTAINER_REQUEST" },
    { title: "bad volume", container: { volumes: ["data:/data"] }, code: "ERR_CONTAINER_REQUEST" },
  ],
});

describeRuntimeConformance(() => import("../src/index.js"), {
  title: "runtime conformance: oci, runc create/start with the supervisor",
  type: "runtime/oci",
  capabilities: { runs: "either", shell: false, container: "optional" },
  container: () => (bundle ? { value: bundle } : undefined),
  node: () => ({ confDir: createStartDir || embeddedDir }),
  launch,
  skip: {
    "execspec.task-argv":
      "config.json mode: the task argv becomes process.args of the task's config.json; the ExecSpec starts the supervisor",
  },
  // RunTimeCreate is the site's command, to which jobrt does not add --preserve-fds (docs/mpi.md).
  mpi: { pmi2: { cannot: "oci.conf RunTimeCreate is a site command jobrt does not add runc's --preserve-fds to" } },
});
