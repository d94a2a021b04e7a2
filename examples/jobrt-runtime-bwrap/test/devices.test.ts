import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DeviceEdits } from "@jobrt/core";
import { type TestNode, createTestNode, createTestStep, launchTask, pluginHost } from "@jobrt/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deviceArgs } from "../src/devices.js";
import bwrap from "../src/index.js";
import { requires } from "../../../tests/helpers/jobrt.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const asRoot = process.getuid?.() === 0;
let node: TestNode;
let dir: string;
beforeAll(() => {
  node = createTestNode();
  dir = tempDir("jobrt-bwrap-devices-");
  chmodSync(dir, 0o755);
  if (!asRoot) return;
  // Two fake GPUs (the numbers of /dev/null and /dev/zero) and a fake driver library dir.
  execFileSync("mknod", ["-m", "666", join(dir, "gpu0"), "c", "1", "3"]);
  execFileSync("mknod", ["-m", "666", join(dir, "gpu1"), "c", "1", "5"]);
  mkdirSync(join(dir, "driver"));
  writeFileSync(join(dir, "driver/libfake.so"), "fake-driver");
});
afterAll(() => {
  node.dispose();
  rmSync(dir, { recursive: true, force: true });
});

function edits(over: Partial<DeviceEdits> = {}): DeviceEdits {
  return {
    devices: ["example.com/gpu=0"],
    deviceNodes: [{ path: "/dev/fakegpu0", hostPath: join(dir, "gpu0"), type: "c", major: 1, minor: 3, permissions: "rwm" }],
    mounts: [{ hostPath: join(dir, "driver"), containerPath: "/mnt", options: ["ro", "nosuid"] }],
    env: ["FAKE_DRIVER=yes", "X=from-device"],
    additionalGids: [],
    hooks: [],
    ...over,
  };
}

async function runTask(argv: string[], deviceEdits: DeviceEdits, env: string[] = []) {
  const host = pluginHost(bwrap);
  const step = createTestStep({ runtime: "bwrap", tasks: 1, argv, cwd: dir, container: { devices: deviceEdits.devices, deviceEdits, env } });
  await host.setup(node, step);
  try {
    const task = step.tasks[0]!;
    return await launchTask(await host.run(node, step, task), step, task, { timeoutMs: 30_000 });
  } finally {
    await host.cleanup(node, step);
  }
}

describe("bwrap applies the host's CDI edits (mknod needs root)", () => {
  // Never a skip: CI runs as root, and a run that is not fails here saying so.
  requires({ "root (mknod makes the fake GPUs)": asRoot });
  it("binds the given node at its container path, the spec's mounts and env; the sandbox's fresh /dev has no other", async () => {
    const script = 'test -c /dev/fakegpu0 && echo node; test -e /dev/fakegpu1 && echo other; test -e /dev/nvidia0 && echo host-dev; cat /mnt/libfake.so; echo " $FAKE_DRIVER $X"';
    const r = await runTask(["sh", "-c", script], edits(), ["X=request"]);
    expect(r.stderr).toBe("");
    // --container-env still wins over the device's env.
    expect(r.stdout).toBe("node\nfake-driver yes request\n");
  });

  it("a node whose target cannot be made on the read-only root is refused in one line, nothing started", async () => {
    const bad = edits({ deviceNodes: [{ path: "/opt/jobrt-no-such-dir/gpu0", hostPath: join(dir, "gpu0"), type: "c", major: 1, minor: 3, permissions: "rwm" }] });
    await expect(runTask(["true"], bad)).rejects.toMatchObject({
      code: "ERR_CONTAINER_REQUEST",
      message: "--container-device: device node /opt/jobrt-no-such-dir/gpu0: the target /opt/jobrt-no-such-dir/gpu0 does not exist in the sandbox (bwrap cannot create it on a read-only root)",
    });
  });
});

describe("a bind the host added for MPI wire-up", () => {
  it("whose target cannot be made is refused naming the wire-up, not --container-device", () => {
    const pmix = { hostPath: "/tmp", containerPath: "/opt/jobrt-no-such-dir/pmix", options: ["rbind"], reason: "MPI wire-up (PMIX_SERVER_TMPDIR)" };
    const edits = { devices: [], deviceNodes: [], mounts: [pmix], env: [], additionalGids: [], hooks: [] };
    expect(() => deviceArgs(edits, "/")).toThrow(
      expect.objectContaining({
        code: "ERR_MPI_WIREUP",
        message:
          "MPI wire-up: the host's bind for MPI wire-up (PMIX_SERVER_TMPDIR): mount /opt/jobrt-no-such-dir/pmix: the target /opt/jobrt-no-such-dir/pmix does not exist in the sandbox (bwrap cannot create it on a read-only root)",
      }),
    );
  });
});

describe("edits bwrap cannot apply are named for the step's log", () => {
  it("hooks, groups and the resolved intelRdt class", () => {
    const skipped = deviceArgs(
      {
        devices: ["example.com/gpu=0"],
        deviceNodes: [],
        mounts: [],
        env: [],
        additionalGids: [44],
        hooks: [{ hookName: "createContainer", path: "/bin/true" }],
        intelRdt: { closID: "gpus" },
      },
      "/",
    ).skipped;
    expect(skipped).toEqual(["1 CDI hook(s) not run", "groups 44 not added", "intelRdt (resctrl class) not set"]);
  });
});
