import { spawnSync } from "node:child_process";
import { appendFileSync, chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { tempDir } from "../helpers/jobrt.js";
import {
  jobrtSite,
  type JobrtSite,
  removeRuncContainers,
  slurm,
  sortedLines,
  startCluster,
  stopClusterAfterAll,
  withoutAllocation,
} from "./cluster.js";

// `srun --gres=gpu:N jobrt exec --container-device nvidia.com/gpu=gres` on the two-node local
// Slurm whose gres.conf names 4 fake GPUs per node: character devices made here with mknod
// (docs/devices.md). Each node's tasks see exactly their step's allocation, renumbered from 0.

describe("--container-device nvidia.com/gpu=gres under Slurm", () => {
  let site: JobrtSite;
  let bundle: string;
  let base: string;

  beforeAll(async () => {
    site = jobrtSite();
    base = tempDir("jobrt-slurm-gpus-");
    chmodSync(base, 0o755);
    const devs = join(base, "dev");
    const specs = join(base, "cdi");
    mkdirSync(devs);
    mkdirSync(specs);
    const devices = [0, 1, 2, 3].map((i) => {
      const r = spawnSync("mknod", [
        "-m",
        "0666",
        join(devs, `gpu${i}`),
        "c",
        i < 2 ? "1" : "240",
        String(i < 2 ? 3 + 2 * i : i),
      ]);
      if (r.status !== 0) throw new Error(`mknod: ${r.stderr}`);
      return {
        name: String(i),
        containerEdits: { deviceNodes: [{ path: `/dev/gpu${i}`, hostPath: join(devs, `gpu${i}`) }] },
      };
    });
    writeFileSync(
      join(specs, "fake-gpu.json"),
      JSON.stringify({ cdiVersion: "0.6.0", kind: "nvidia.com/gpu", devices }),
    );
    for (const node of ["nodea", "nodeb"])
      appendFileSync(join(site.root, "etc", node, "jobrt.conf"), `CdiSpecDirs=${specs}\n`);
    bundle = busyboxBundle(join(base, "bundle"));
    await startCluster(2, undefined, "linuxproc", { count: 4, files: `${devs}/gpu[0-3]` });
  });
  stopClusterAfterAll(() => {
    if (site && bundle) removeRuncContainers([bundle, site.spoolRoot]);
    if (site) rmSync(site.root, { recursive: true, force: true });
    if (base) rmSync(base, { recursive: true, force: true });
  });

  const srun = (args: string[]) => slurm(["srun", ...args], { env: site.env, timeoutMs: 90_000 });
  const show =
    'echo "$SLURMD_NODENAME step=$SLURM_STEP_GPUS dev=$(ls /dev | grep gpu | tr "\\n" " ")cuda=$CUDA_VISIBLE_DEVICES"';

  it("srun -N 2 --gres=gpu:2: each node's task sees its 2 allocated GPUs and no other", async () => {
    const r = await srun([
      "-N",
      "2",
      "-n",
      "2",
      "--gres=gpu:2",
      "jobrt",
      "exec",
      "--runtime",
      "oci",
      "--container",
      bundle,
      "--container-device",
      "nvidia.com/gpu=gres",
      "--",
      "sh",
      "-c",
      show,
    ]);
    expect(withoutAllocation(r.stderr)).toBe("");
    expect(r.code).toBe(0);
    expect(sortedLines(r.stdout)).toEqual([
      "nodea step=0,1 dev=gpu0 gpu1 cuda=0,1",
      "nodeb step=0,1 dev=gpu0 gpu1 cuda=0,1",
    ]);
  });

  it("a device outside the step's allocation is refused in one line, and the task does not start", async () => {
    const r = await srun([
      "-N",
      "1",
      "-n",
      "1",
      "--gres=gpu:1",
      "jobrt",
      "exec",
      "--runtime",
      "oci",
      "--container",
      bundle,
      "--container-device",
      "nvidia.com/gpu=3",
      "--",
      "sh",
      "-c",
      show,
    ]);
    expect(r.stdout).toBe("");
    expect(withoutAllocation(r.stderr)).toMatch(
      /^jobrt: --container-device nvidia.com\/gpu=3: not allocated to this step \(SLURM_STEP_GPUS lists 0\); use nvidia.com\/gpu=gres\n/,
    );
    expect(r.code).not.toBe(0);
  });

  it("a step allocated no GPU gets none: a named GPU is refused, though the task exports CUDA_VISIBLE_DEVICES (issue 40, item A)", async () => {
    // slurmstepd unsets SLURM_STEP_GPUS and CUDA_VISIBLE_DEVICES in a CPU-only step; the task
    // sets CUDA_VISIBLE_DEVICES itself, as a job script may.
    const r = await srun([
      "-N",
      "1",
      "-n",
      "1",
      "sh",
      "-c",
      'CUDA_VISIBLE_DEVICES=0,1,2,3 exec jobrt exec --runtime oci --container "$1" --container-device nvidia.com/gpu=1 -- sh -c "$2"',
      "sh",
      bundle,
      show,
    ]);
    expect(r.stdout).toBe("");
    expect(withoutAllocation(r.stderr)).toMatch(
      /^jobrt: --container-device nvidia.com\/gpu=1: not allocated to this step \(Slurm allocated it no GPU: SLURM_STEP_GPUS is not set\); ask Slurm for GPUs \(--gres=gpu:N\)\n/,
    );
    expect(r.code).not.toBe(0);
  });
});
