import { existsSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import type { StepRecord } from "@jobrt/core";
import { type InvalidCase, describeRuntimeConformance } from "@jobrt/testkit";
import { afterAll, beforeAll } from "vitest";
import { busyboxImage } from "./image.js";

let image: string;
let noPasswd: string;
beforeAll(() => {
  image = busyboxImage();
  noPasswd = busyboxImage();
  rmSync(`${noPasswd}/etc/passwd`);
});
afterAll(() => {
  for (const d of [image, noPasswd]) if (d) rmSync(d, { recursive: true, force: true });
});

const invalid: InvalidCase[] = [
  { title: "missing image dir", container: { value: "/nonexistent/jobrt-image" }, code: "ERR_CONTAINER_IMAGE" },
  { title: "image without /etc/passwd", container: () => ({ value: noPasswd }), code: "ERR_CONTAINER_IMAGE" },
  { title: "bind target missing in image", container: { volumes: ["/tmp:/no-such-dir"] }, code: "ERR_CONTAINER_REQUEST" },
  { title: "bind with flags", container: { volumes: ["/tmp:/mnt:ro"] }, code: "ERR_CONTAINER_REQUEST" },
  { title: "bad env name", container: { env: ["1BAD=x"] }, code: "ERR_CONTAINER_REQUEST" },
  { title: "relative workdir", container: { workdir: "work" }, code: "ERR_CONTAINER_REQUEST" },
  { title: "unknown --container-opt", container: { options: { turbo: ["yes"] } }, code: "ERR_CONTAINER_REQUEST" },
  { title: "modules", container: { modules: ["mpich"] }, code: "ERR_CONTAINER_REQUEST" },
];

// Without --container-workdir a task starts in the job's cwd when the image (or a bind) has it, else
// in / where ch-run starts (README, --container-workdir); the testkit's cwd is a host temp dir.
const launch = { cwd: (step: StepRecord) => (existsSync(join(image, step.cwd)) ? step.cwd : "/") };

// ch-run binds the host's /dev into every container: a device the step was not given is there too
// (the step's cgroup, Slurm's ConstrainDevices, limits its use). README, Devices.
const skip = { "devices.unallocated": "ch-run shows the host's /dev (README, Devices)" };

// Neither wire-up reaches a ch-run task: the host must refuse both (docs/mpi.md).
const mpi = {
  pmi2: { cannot: "charliecloud declares no pmi-fd or pass-fds capability" },
  pmix: { cannot: "ch-run binds only onto a target the image has, and the PMIx directory is not in it" },
};

// The image and binds as most jobs use them: host env passes through ch-run into the container.
describeRuntimeConformance(() => import("../src/index.js"), {
  type: "runtime/charliecloud",
  capabilities: { runs: "exec-spec", container: "required" },
  container: () => ({ value: image, volumes: [`${dirname(image)}:/mnt`] }),
  invalid,
  launch,
  skip,
  mpi,
});

// --container-clearenv plus --container-env: per-task env files in SpoolDir, the stateful path.
describeRuntimeConformance(() => import("../src/index.js"), {
  title: "runtime conformance: charliecloud with clearenv and env files",
  type: "runtime/charliecloud",
  capabilities: { runs: "exec-spec", container: "required" },
  container: () => ({ value: image, clearEnv: true, env: ["GREETING=hello world"], workdir: "/work" }),
  skip,
  mpi,
});

// As root for an unprivileged job user (the usual production case): launches drop to nobody, so
// the per-task env files must be the job user's, and ch-run runs unprivileged.
if (process.getuid?.() === 0) {
  describeRuntimeConformance(() => import("../src/index.js"), {
    title: "runtime conformance: charliecloud for job user nobody",
    type: "runtime/charliecloud",
    capabilities: { runs: "exec-spec", container: "required" },
    user: { uid: 65534, gid: 65534, name: "nobody", home: "/nonexistent" },
    container: () => ({ value: image, env: ["GREETING=hello"], clearEnv: true }),
    launch,
    skip,
    mpi,
  });
}
