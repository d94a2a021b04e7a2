import type { DeviceEdits } from "@jobrt/core";
import { describe, expect, it } from "vitest";
import { rewriteConfig } from "../src/bundle.js";
import { parseOciConf } from "../src/conf.js";
import { withMpiNamespaces } from "../src/devices.js";

// What the host asks for a step with MPI wire-up (launcher wireupedits.ts): no device at all.
const MPI_EDITS: DeviceEdits = {
  devices: [],
  deviceNodes: [],
  mounts: [
    { hostPath: "/var/spool/slurmd/pmix.4.0", containerPath: "/var/spool/slurmd/pmix.4.0", options: ["rbind", "rw"] },
    { hostPath: "/dev/shm", containerPath: "/dev/shm", options: ["rbind", "rw"] },
  ],
  env: [],
  additionalGids: [],
  hooks: [],
  hostNamespaces: ["network", "ipc", "pid", "uts"],
};

const WILDCARD = { allow: true, type: "c", major: 136, access: "rwm" };

/** What `runc spec` (or `runc spec --rootless`) writes, in the parts that matter here. */
const bundle = (rootless: boolean) => ({
  hostname: "runc",
  process: { args: ["sh"] },
  mounts: [
    { destination: "/proc", type: "proc", source: "proc" },
    { destination: "/dev/shm", type: "tmpfs", source: "shm", options: ["size=65536k"] },
    { destination: "/dev/mqueue", type: "mqueue", source: "mqueue" },
  ],
  linux: {
    namespaces: ["pid", "network", "ipc", "uts", "mount", ...(rootless ? ["user"] : [])].map((type) => ({ type })),
    resources: { devices: [{ allow: false, access: "rwm" }, WILDCARD] },
  },
});

const rewrite = (config: Record<string, unknown>, devices: DeviceEdits) =>
  rewriteConfig(config, {
    terminal: false,
    rootfs: "/b/rootfs",
    extraMounts: [],
    disableHooks: [],
    env: [],
    args: ["a.out"],
    devices,
    devicesCgroupRefusesWhitelist: false,
  }) as { hostname?: string; mounts: { destination: string; type: string }[]; linux: Record<string, unknown> };

const types = (c: { linux: Record<string, unknown> }) => (c.linux.namespaces as { type: string }[]).map((n) => n.type);

describe("the host's namespaces for an MPI step (docs/mpi.md)", () => {
  it("as root: the container keeps only its mount namespace, loses its hostname, /dev/shm is the host's bound in its place", () => {
    const c = rewrite(bundle(false), MPI_EDITS);
    expect(types(c)).toEqual(["mount"]);
    expect(c.hostname).toBeUndefined();
    expect(c.mounts.map((m) => `${m.destination} ${m.type}`)).toEqual([
      "/proc proc",
      "/var/spool/slurmd/pmix.4.0 none",
      "/dev/shm none",
    ]);
  });

  it("rootless: its own user and PID namespace stay (it could mount no /proc for the host's)", () => {
    const c = rewrite(bundle(true), MPI_EDITS);
    expect(types(c)).toEqual(["pid", "mount", "user"]);
    expect(c.mounts.map((m) => m.destination)).not.toContain("/dev/mqueue");
  });

  it("edits without devices leave the bundle's device rules alone", () => {
    expect(rewrite(bundle(false), MPI_EDITS).linux.resources).toEqual({
      devices: [{ allow: false, access: "rwm" }, WILDCARD],
    });
  });

  it("edits without hostNamespaces leave the bundle's namespaces and hostname", () => {
    const { hostNamespaces: _none, ...devicesOnly } = MPI_EDITS;
    const c = rewrite(bundle(false), devicesOnly);
    expect(types(c)).toEqual(["pid", "network", "ipc", "uts", "mount"]);
    expect(c.hostname).toBe("runc");
  });

  it("oci.conf MpiNamespaces=bundle declines them; host (the default) keeps them; another value is one line naming it", () => {
    const keys = 'RunTimeRun="runc run %n -b %b"\nRunTimeKill="runc kill %n"\nRunTimeDelete="runc delete %n"\n';
    const declined = parseOciConf(`${keys}MpiNamespaces=bundle\n`, "/etc/jobrt/oci.conf");
    expect(withMpiNamespaces(MPI_EDITS, declined).hostNamespaces).toBeUndefined();
    expect(withMpiNamespaces(MPI_EDITS, declined).mounts).toEqual(MPI_EDITS.mounts);
    const byDefault = parseOciConf(keys, "/etc/jobrt/oci.conf");
    expect(byDefault.mpiNamespaces).toBe("host");
    expect(withMpiNamespaces(MPI_EDITS, byDefault)).toBe(MPI_EDITS);
    expect(() => parseOciConf(`${keys}MpiNamespaces=shared\n`, "/etc/jobrt/oci.conf")).toThrow(
      /^\/etc\/jobrt\/oci\.conf:4:\d+: MpiNamespaces.*shared/,
    );
  });
});
