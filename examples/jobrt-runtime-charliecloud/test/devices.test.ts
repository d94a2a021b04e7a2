import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DeviceEdits, ExecSpec } from "@jobrt/core";
import { createTestNode, createTestStep, launchTask, pluginHost } from "@jobrt/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addDeviceEdits } from "../src/devices.js";
import plugin from "../src/index.js";
import { busyboxImage } from "./image.js";
import { requires } from "../../../tests/helpers/jobrt.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const asRoot = process.getuid?.() === 0;
const host = pluginHost(plugin);
let image: string;
let work: string;
// A fake GPU at its own path in the host's /dev, as a vendor's spec names a real one.
const gpu = `/dev/jobrt-cc-test-${process.pid}-gpu0`;
beforeAll(async () => {
  image = busyboxImage();
  work = tempDir("jobrt-cc-devices-");
  chmodSync(work, 0o755);
  mkdirSync(join(work, "driver"));
  writeFileSync(join(work, "driver/libfake.so"), "fake-driver");
  chmodSync(join(work, "driver/libfake.so"), 0o644);
  if (asRoot) execFileSync("mknod", ["-m", "666", gpu, "c", "1", "3"]);
  await plugin.init({ context: "step" });
});
afterAll(async () => {
  await plugin.fini();
  rmSync(gpu, { force: true });
  rmSync(image, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

function edits(over: Partial<DeviceEdits> = {}): DeviceEdits {
  return {
    devices: ["example.com/gpu=0"],
    deviceNodes: [{ path: gpu, hostPath: gpu, type: "c", major: 1, minor: 3, permissions: "rwm" }],
    mounts: [{ hostPath: join(work, "driver"), containerPath: "/data", options: ["ro"] }],
    env: ["FAKE_DRIVER=yes", "X=from-device"],
    additionalGids: [],
    hooks: [],
    ...over,
  };
}

async function runTask(argv: string[], deviceEdits: DeviceEdits, env: string[] = []) {
  const node = createTestNode();
  const step = createTestStep({ runtime: "charliecloud", tasks: 1, argv, container: { value: image, devices: deviceEdits.devices, deviceEdits, env } });
  try {
    await host.setup(node, step);
    const task = step.tasks[0]!;
    await host.taskInit(node, step, task);
    return await launchTask((await host.run(node, step, task)) as ExecSpec, step, task);
  } finally {
    await host.cleanup(node, step);
    node.dispose();
  }
}

describe("charliecloud applies the host's CDI edits (mknod needs root)", () => {
  // Never a skip: CI runs as root, and a run that is not fails here saying so.
  requires({ "root (mknod makes the fake GPUs)": asRoot });
  it("the node is there (ch-run binds the host's /dev), the spec's mount is bound, its env set under --container-env", async () => {
    const r = await runTask(["sh", "-c", `test -c ${gpu} && echo node; cat /data/libfake.so; echo " $FAKE_DRIVER $X"`], edits(), ["X=request"]);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("node\nfake-driver yes request\n");
  });

  it("a node at a path ch-run cannot create is refused in one line, nothing started", async () => {
    const bad = edits({ deviceNodes: [{ path: "/dev/jobrt-cc-no-such-node", hostPath: gpu, type: "c", major: 1, minor: 3, permissions: "rwm" }] });
    await expect(runTask(["true"], bad)).rejects.toMatchObject({
      code: "ERR_CONTAINER_REQUEST",
      message: '--container-device "example.com/gpu=0": the target /dev/jobrt-cc-no-such-node does not exist in the host\'s /dev, which ch-run binds into the container, and ch-run cannot create it',
    });
  });
});

describe("a bind the host added for MPI wire-up", () => {
  it("whose target the image lacks is refused naming the wire-up, not --container-device", () => {
    const request = { image, binds: [], env: [], clearEnv: false, privateTmp: false, home: false };
    const pmix = { hostPath: work, containerPath: "/var/spool/slurmd/pmix.7.0", options: ["rbind"], reason: "MPI wire-up (PMIX_SERVER_TMPDIR)" };
    expect(() => addDeviceEdits(request, { ...edits({ devices: [], deviceNodes: [] }), mounts: [pmix] })).toThrow(
      expect.objectContaining({
        code: "ERR_MPI_WIREUP",
        message:
          "MPI wire-up: the host's bind for MPI wire-up (PMIX_SERVER_TMPDIR): the target /var/spool/slurmd/pmix.7.0 does not exist in the image, and ch-run cannot create it (make the directory in the image)",
      }),
    );
  });
});

describe("edits ch-run cannot apply are named for the step's log", () => {
  it("hooks, groups and the resolved intelRdt class", () => {
    const request = { image: "/", binds: [], env: [], clearEnv: false, privateTmp: false, home: false };
    const skipped = addDeviceEdits(request, {
      devices: ["example.com/gpu=0"],
      deviceNodes: [],
      mounts: [],
      env: [],
      additionalGids: [44],
      hooks: [{ hookName: "createContainer", path: "/bin/true" }],
      intelRdt: { closID: "gpus" },
    });
    expect(skipped).toEqual(["1 CDI hook(s) not run", "groups 44 not added", "intelRdt (resctrl class) not set"]);
  });
});
