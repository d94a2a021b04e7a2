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

const rewrite = (devices: DeviceEdits | undefined, disableHooks: string[] = []) =>
  rewriteConfig(bundle(), {
    terminal: false,
    rootfs: "/r",
    extraMounts: [],
    disableHooks,
    env: [],
    args: ["true"],
    spoolMount: { source: "/s", destination: "/spool" },
    ...(devices ? { devices } : {}),
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
    const c = rewriteConfig(config, {
      terminal: false,
      rootfs: "/r",
      extraMounts: [],
      disableHooks: [],
      env: [],
      args: ["true"],
      devices: EDITS,
    }) as ReturnType<typeof rewrite>;
    expect(c.linux.devices).toEqual(bundle().linux.devices);
    expect(c.mounts.slice(1, 3)).toEqual([
      { destination: "/dev/gpu1", type: "none", source: "/tmp/x/gpu1", options: ["bind", "nosuid", "noexec"] },
      { destination: "/dev/gpu2", type: "none", source: "/tmp/x/gpu2", options: ["bind", "nosuid", "noexec"] },
    ]);
  });

  it("without devices the bundle's devices and rules are left as they are", () => {
    const c = rewrite(undefined);
    expect(c.linux).toEqual(bundle().linux);
  });
});
