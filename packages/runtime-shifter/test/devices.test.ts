import { chmodSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ContainerRequest, DeviceEdits, StepRecord } from "@jobrt/core";
import { afterAll, describe, expect, it } from "vitest";
import { loadShifterConf } from "../src/conf.js";
import { shifterOptions } from "../src/exec.js";
import { validateRequest } from "../src/request.js";
import { parseUdiRootConf } from "../src/udiroot.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const udi = parseUdiRootConf(
  ["module_gpu_siteEnv=CUDA=1", "module_mpich_siteEnv=MPI=1", "module_rocm_enabled=0"].join("\n"),
  "/etc/shifter/udiRoot.conf",
);
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function conf(lines: string[]) {
  const dir = tempDir("shifter-devices-");
  dirs.push(dir);
  writeFileSync(join(dir, "shifter.conf"), `${lines.join("\n")}\n`);
  chmodSync(join(dir, "shifter.conf"), 0o644);
  return loadShifterConf(dir, process.getuid?.() ?? 0);
}

const gpus: DeviceEdits = {
  devices: ["nvidia.com/gpu=0", "nvidia.com/gpu=1"],
  deviceNodes: [
    { path: "/dev/nvidia0", hostPath: "/dev/nvidia0", type: "c", major: 195, minor: 0, permissions: "rwm" },
    { path: "/dev/nvidia1", hostPath: "/dev/nvidia1", type: "c", major: 195, minor: 1, permissions: "rwm" },
  ],
  mounts: [{ hostPath: "/usr/lib/libcuda.so.1", containerPath: "/usr/lib/libcuda.so.1", options: ["ro"] }],
  env: ["NVIDIA_VISIBLE_DEVICES=void", "CUDA_VISIBLE_DEVICES=0,1"],
  additionalGids: [],
  hooks: [],
};

function step(container: Partial<ContainerRequest>): StepRecord {
  return {
    jobId: 1,
    stepId: 0,
    kind: "normal",
    runtime: "shifter",
    uid: 1000,
    gid: 1000,
    user: "u",
    home: "/home/u",
    cwd: "/home/u",
    argv: ["true"],
    env: {},
    tasks: [],
    totalTasks: 1,
    nodeId: 0,
    nnodes: 1,
    pty: false,
    container: {
      value: "id:" + "a".repeat(64),
      volumes: [],
      modules: [],
      env: [],
      clearEnv: false,
      options: {},
      devices: gpus.devices,
      deviceEdits: gpus,
      ...container,
    },
  };
}

describe("runtime-shifter maps the host's CDI devices to its site module", () => {
  const site = conf(["AllowedImageTypes=id", "DeviceModules=nvidia.com/gpu:gpu,amd.com/gpu:rocm"]);

  it("adds the module DeviceModules names for the devices' kind, and their env under --container-env", () => {
    const request = validateRequest(step({ modules: ["mpich"], env: ["CUDA_VISIBLE_DEVICES=1"] }), site, udi);
    expect(shifterOptions(request!)).toEqual([
      "--module=mpich,gpu",
      "--env=NVIDIA_VISIBLE_DEVICES=void",
      "--env=CUDA_VISIBLE_DEVICES=1",
    ]);
  });

  it.each([
    [
      "a kind with no module",
      conf(["AllowedImageTypes=id"]),
      {},
      /^--container-device "nvidia.com\/gpu=0": DeviceModules names no Shifter module for nvidia.com\/gpu: /,
    ],
    [
      "a disabled module",
      conf(["AllowedImageTypes=id", "DeviceModules=nvidia.com/gpu:rocm"]),
      {},
      /module rocm is disabled in udiRoot.conf/,
    ],
    [
      "--container-module none",
      site,
      { modules: ["none"] },
      /^--container-module "none": disables every module, and nvidia.com\/gpu=0,nvidia.com\/gpu=1 needs module gpu$/,
    ],
    [
      "a node away from its host path",
      site,
      {
        deviceEdits: {
          ...gpus,
          deviceNodes: [
            { path: "/dev/gpu0", hostPath: "/tmp/fake0", type: "c" as const, major: 1, minor: 3, permissions: "rwm" },
          ],
        },
      },
      /device node \/dev\/gpu0 \(host \/tmp\/fake0\): shifter shows the host's \/dev and can place no node elsewhere$/,
    ],
  ])("refuses %s in one line", (_, c, container, message) => {
    let error: unknown;
    try {
      validateRequest(step(container), c, udi);
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: "ERR_CONTAINER_REQUEST" });
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain("\n");
  });

  it("edits without a device (an MPI step's, docs/mpi.md) add no module and refuse no --container-module none", () => {
    const mpiOnly: DeviceEdits = {
      ...gpus,
      devices: [],
      deviceNodes: [],
      env: [],
      mounts: [{ hostPath: "/dev/shm", containerPath: "/dev/shm", options: ["rbind", "rw"] }],
      hostNamespaces: ["network", "ipc", "pid", "uts"],
    };
    const request = validateRequest(step({ devices: [], deviceEdits: mpiOnly, modules: ["none"] }), site, udi);
    expect(shifterOptions(request!)).toEqual(["--module=none"]);
  });

  it("a malformed DeviceModules is refused at its line", () => {
    expect(() => conf(["DeviceModules=gpu"])).toThrow(/DeviceModules.*"gpu" is not KIND:MODULE/);
  });
});
