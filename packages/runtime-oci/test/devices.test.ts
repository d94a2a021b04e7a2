import type { DeviceEdits } from "@jobrt/core";
import { describe, expect, it } from "vitest";
import { rewriteConfig } from "../src/bundle.js";

const EDITS: DeviceEdits = {
  devices: ["nvidia.com/gpu=1", "nvidia.com/gpu=2"],
  deviceNodes: [
    { path: "/dev/gpu1", hostPath: "/tmp/x/gpu1", type: "c", major: 1, minor: 5, permissions: "rwm" },
    {
      path: "/dev/gpu2",
      hostPath: "/tmp/x/gpu2",
      type: "c",
      major: 240,
      minor: 2,
      permissions: "rw",
      fileMode: 0o660,
      uid: 0,
      gid: 44,
    },
  ],
  mounts: [
    { hostPath: "/usr/lib/libfake.so", containerPath: "/usr/lib/libfake.so", options: ["ro"] },
    { hostPath: "tmpfs", containerPath: "/run/fake", type: "tmpfs", options: ["nosuid"] },
  ],
  env: ["CUDA_VISIBLE_DEVICES=0,1"],
  additionalGids: [44],
  hooks: [{ hookName: "createContainer", path: "/usr/bin/fake-hook", args: ["fake-hook", "update-ldcache"] }],
};

const bundle = () => ({
  process: { args: ["sh"], user: { uid: 0, gid: 0, additionalGids: [44, 10] } },
  mounts: [{ destination: "/proc", type: "proc", source: "proc" }],
  hooks: { prestart: [{ path: "/bin/old" }] },
  linux: {
    devices: [
      { path: "/dev/gpu1", type: "c", major: 9, minor: 9 },
      { path: "/dev/fuse", type: "c", major: 10, minor: 229 },
    ],
    resources: {
      devices: [
        { allow: true, access: "rwm" },
        { allow: true, type: "c", major: 10, minor: 229, access: "rwm" },
      ],
    },
  },
});

const rewrite = (devices: DeviceEdits | undefined, disableHooks: string[] = [], nested = false) =>
  rewriteConfig(bundle(), {
    terminal: false,
    rootfs: "/r",
    extraMounts: [],
    disableHooks,
    env: [],
    args: ["true"],
    spoolMount: { source: "/s", destination: "/spool" },
    ...(devices ? { devices } : {}),
    devicesCgroupRefusesWhitelist: nested,
  }) as {
    linux: { devices: unknown[]; resources: { devices: unknown[] } };
    mounts: { destination: string }[];
    hooks: Record<string, unknown[]>;
    process: { user: { additionalGids: number[] } };
  };

describe("runtime-oci applies the host's CDI edits to config.json", () => {
  it("device nodes with the host's numbers, replacing a bundle node of the same path", () => {
    expect(rewrite(EDITS).linux.devices).toEqual([
      { path: "/dev/fuse", type: "c", major: 10, minor: 229 },
      { path: "/dev/gpu1", type: "c", major: 1, minor: 5 },
      { path: "/dev/gpu2", type: "c", major: 240, minor: 2, fileMode: 0o660, uid: 0, gid: 44 },
    ]);
  });

  it("deny-all first, the bundle's one-device rules, then exactly the devices given; a wildcard allow is dropped", () => {
    expect(rewrite(EDITS).linux.resources.devices).toEqual([
      { allow: false, access: "rwm" },
      { allow: true, type: "c", major: 10, minor: 229, access: "rwm" },
      { allow: true, type: "c", major: 1, minor: 5, access: "rwm" },
      { allow: true, type: "c", major: 240, minor: 2, access: "rw" },
    ]);
  });

  it("mounts before the spool mount (a CDI mount without a type is a bind), hooks, gids once", () => {
    const c = rewrite(EDITS);
    expect(c.mounts).toEqual([
      { destination: "/proc", type: "proc", source: "proc" },
      { destination: "/usr/lib/libfake.so", type: "none", source: "/usr/lib/libfake.so", options: ["rbind", "ro"] },
      { destination: "/run/fake", type: "tmpfs", source: "tmpfs", options: ["nosuid"] },
      { destination: "/spool", type: "none", source: "/s", options: ["bind"] },
    ]);
    expect(c.hooks.createContainer).toEqual([{ path: "/usr/bin/fake-hook", args: ["fake-hook", "update-ldcache"] }]);
    expect(c.process.user.additionalGids).toEqual([44, 10]);
    expect(rewrite(EDITS, ["createContainer"]).hooks.createContainer).toBeUndefined();
  });

  it("rootless (a user namespace): the host's nodes are bind-mounted at their container paths, not made", () => {
    const config = bundle() as ReturnType<typeof bundle> & { linux: { namespaces?: unknown[] } };
    config.linux.namespaces = [{ type: "user" }, { type: "mount" }];
    const options = {
      terminal: false,
      rootfs: "/r",
      extraMounts: [],
      disableHooks: [],
      env: [],
      args: ["true"],
      devices: EDITS,
    };
    const c = rewriteConfig(config, { ...options, devicesCgroupRefusesWhitelist: true }) as ReturnType<typeof rewrite>;
    expect(c.linux.devices).toEqual(bundle().linux.devices);
    // Rootless runc sets no device rules: nothing to fit below a constrained cgroup.
    const plain = rewriteConfig(config, { ...options, devicesCgroupRefusesWhitelist: false }) as typeof c;
    expect(c.linux.resources).toEqual(plain.linux.resources);
    expect(c.mounts.slice(1, 3)).toEqual([
      { destination: "/dev/gpu1", type: "none", source: "/tmp/x/gpu1", options: ["bind", "nosuid", "noexec"] },
      { destination: "/dev/gpu2", type: "none", source: "/tmp/x/gpu2", options: ["bind", "nosuid", "noexec"] },
    ]);
  });

  it("below a devices cgroup that refuses runc's whitelist (ConstrainDevices): allow all, block devices denied; the nodes are still made", () => {
    const c = rewrite(EDITS, [], true);
    expect(c.linux.resources.devices).toEqual([
      { allow: true, access: "rwm" },
      { allow: false, type: "b", access: "rwm" },
    ]);
    expect(c.linux.devices).toEqual(rewrite(EDITS).linux.devices);
    // Without devices too: runc's whitelist of a plain bundle cannot start there either.
    expect(rewrite(undefined, [], true).linux.resources.devices).toEqual(c.linux.resources.devices);
  });

  it("there a device its last rule denies stays denied, and a block device allowed by name keeps every block device open", () => {
    const config = bundle();
    config.linux.resources.devices = [
      { allow: false, access: "rwm" },
      { allow: true, type: "c", major: 10, minor: 229, access: "rwm" },
      { allow: false, type: "c", major: 10, minor: 229, access: "rwm" },
      { allow: false, type: "c", major: 1, minor: 3, access: "rwm" },
      { allow: true, type: "c", major: 1, minor: 3, access: "rwm" },
      { allow: true, type: "b", major: 8, minor: 0, access: "r" },
    ];
    const c = rewriteConfig(config, {
      terminal: false,
      rootfs: "/r",
      extraMounts: [],
      disableHooks: [],
      env: [],
      args: ["true"],
      devicesCgroupRefusesWhitelist: true,
    }) as ReturnType<typeof rewrite>;
    expect(c.linux.resources.devices).toEqual([
      { allow: true, access: "rwm" },
      { allow: false, type: "c", major: 10, minor: 229, access: "rwm" },
    ]);
  });

  it("intelRdt: the edits' resctrl class replaces the bundle's linux.intelRdt; without one the bundle's stays", () => {
    const config = bundle() as ReturnType<typeof bundle> & { linux: { intelRdt?: unknown } };
    config.linux.intelRdt = { closID: "bundle", l3CacheSchema: "L3:0=f" };
    const options = { terminal: false, rootfs: "/r", extraMounts: [], disableHooks: [], env: [], args: ["true"] };
    const intelRdt = { closID: "gpus", memBwSchema: "MB:0=50", enableMBM: true };
    const withRdt = rewriteConfig(config, { ...options, devices: { ...EDITS, intelRdt } }) as {
      linux: { intelRdt?: unknown };
    };
    expect(withRdt.linux.intelRdt).toEqual(intelRdt);
    const without = rewriteConfig(config, { ...options, devices: EDITS }) as typeof withRdt;
    expect(without.linux.intelRdt).toEqual({ closID: "bundle", l3CacheSchema: "L3:0=f" });
  });

  it("without devices the bundle's devices and rules are left as they are", () => {
    const c = rewrite(undefined);
    expect(c.linux).toEqual(bundle().linux);
  });
});
