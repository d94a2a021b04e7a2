import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { loadSiteConfig } from "../src/siteconf.js";
import { loadCdiRegistry } from "../src/devices/cdiregistry.js";
import { cdiInventory } from "../src/devices/inventory.js";
import { parseCdiSpec } from "../src/devices/cdispec.js";
import { gresAllocation } from "../src/devices/gres.js";
import { type DeviceConf, resolveDevices } from "../src/devices/resolve.js";

// No GPU needed: the "GPUs" are /dev/null and /dev/zero under container names (docs/devices.md).
const devNumbers = (path: string) => {
  const rdev = statSync(path, { bigint: true }).rdev;
  return { major: Number((rdev >> 8n) & 0xfffn), minor: Number(rdev & 0xffn) };
};

function gpuSpec(kind = "nvidia.com/gpu", version = "0.6.0") {
  return {
    cdiVersion: version,
    kind,
    containerEdits: {
      env: ["FAKE_DRIVER=1"],
      mounts: [{ hostPath: "/etc/hostname", containerPath: "/usr/lib/fake-driver.so", options: ["ro", "bind"] }],
    },
    devices: [0, 1, 2, 3].map((i) => ({
      name: String(i),
      containerEdits: {
        deviceNodes: [{ path: `/dev/gpu${i}`, hostPath: i % 2 === 0 ? "/dev/null" : "/dev/zero" }],
        additionalGids: [0, 44],
      },
    })),
  };
}

let base: string;
let dirs: string[];
let conf: DeviceConf;
beforeEach(() => {
  base = tempDir("jobrt-cdi-");
  dirs = [join(base, "etc"), join(base, "run")];
  conf = { specDirs: dirs, defaults: [], gresKind: "nvidia.com/gpu", gresMap: "index" };
});

function write(dir: number, name: string, content: unknown): string {
  const d = dirs[dir]!;
  mkdirSync(d, { recursive: true });
  const file = join(d, name);
  writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content));
  chmodSync(file, 0o644);
  return file;
}

const resolve = (names: string[], env: Record<string, string> = {}, asRoot?: boolean) =>
  resolveDevices(names, env, conf, asRoot);
const errorOf = (f: () => unknown) => {
  try {
    f();
  } catch (error) {
    return error as Error & { code: string };
  }
  throw new Error("no error");
};

describe("CDI spec reading", () => {
  it("reads JSON and YAML alike, every version up to 1.1.0", () => {
    write(0, "a.json", gpuSpec());
    write(
      1,
      "b.yaml",
      "cdiVersion: 1.1.0\nkind: acme.com/fpga\ndevices:\n  - name: f0\n    containerEdits:\n      deviceNodes:\n        - path: /dev/fpga0\n          hostPath: /dev/null\n          permissions: rw\n",
    );
    const registry = loadCdiRegistry(dirs, false);
    expect([...registry.devices.keys()].sort()).toEqual([
      "acme.com/fpga=f0",
      "nvidia.com/gpu=0",
      "nvidia.com/gpu=1",
      "nvidia.com/gpu=2",
      "nvidia.com/gpu=3",
    ]);
    const edits = resolve(["acme.com/fpga=f0"]);
    expect(edits?.deviceNodes).toEqual([
      { path: "/dev/fpga0", hostPath: "/dev/null", type: "c", ...devNumbers("/dev/null"), permissions: "rw" },
    ]);
  });

  it("takes type, major and minor from the host's node, not from the spec", () => {
    const spec = gpuSpec();
    Object.assign(spec.devices[1]!.containerEdits.deviceNodes[0]!, { type: "b", major: 1, minor: 99 });
    write(0, "gpu.json", spec);
    const edits = resolve(["nvidia.com/gpu=1"]);
    expect(edits?.deviceNodes[0]).toMatchObject({ path: "/dev/gpu1", type: "c", ...devNumbers("/dev/zero") });
  });

  it("a later spec dir wins a name; two specs of one dir claiming it is an error naming both", () => {
    write(0, "a.json", gpuSpec());
    const run = gpuSpec();
    run.devices[0]!.containerEdits.deviceNodes[0]!.hostPath = "/dev/zero";
    write(1, "a.json", run);
    expect(resolve(["nvidia.com/gpu=0"])?.deviceNodes[0]?.hostPath).toBe("/dev/zero");
    const second = write(1, "b.json", gpuSpec());
    const e = errorOf(() => resolve(["nvidia.com/gpu=0"]));
    expect(e.code).toBe("ERR_DEVICE");
    expect(e.message).toBe(
      `CDI spec ${second}: devices: nvidia.com/gpu=0 is also described by ${join(dirs[1]!, "a.json")} (two specs of one directory claim one name)`,
    );
  });

  it.each([
    [
      "an unknown cdiVersion",
      (s: ReturnType<typeof gpuSpec>) => Object.assign(s, { cdiVersion: "1.2.0" }),
      'cdiVersion: "1.2.0" is not a CDI version jobrt reads',
    ],
    [
      "a relative path",
      (s: ReturnType<typeof gpuSpec>) =>
        Object.assign(s.devices[2]!.containerEdits.deviceNodes[0]!, { path: "dev/gpu2" }),
      'devices[2].containerEdits.deviceNodes[0].path: "dev/gpu2" is not an absolute path',
    ],
    [
      "a relative mount",
      (s: ReturnType<typeof gpuSpec>) => Object.assign(s.containerEdits.mounts[0]!, { hostPath: "lib" }),
      'containerEdits.mounts[0].hostPath: "lib" is not an absolute path',
    ],
    [
      "a bad kind",
      (s: ReturnType<typeof gpuSpec>) => Object.assign(s, { kind: "gpu" }),
      'kind: "gpu" is not vendor.com/class',
    ],
    [
      "a bad hook",
      (s: ReturnType<typeof gpuSpec>) =>
        Object.assign(s.containerEdits, { hooks: [{ hookName: "prerun", path: "/bin/true" }] }),
      'containerEdits.hooks[0].hookName: "prerun" is not one of',
    ],
    [
      "an intelRdt field jobrt would drop",
      (s: ReturnType<typeof gpuSpec>) => Object.assign(s.containerEdits, { intelRdt: { closID: "a", schemata: [] } }),
      "containerEdits.intelRdt.schemata: not an intelRdt field jobrt applies (closID, l3CacheSchema, memBwSchema, enableCMT, enableMBM)",
    ],
    [
      "an intelRdt class that is no directory name",
      (s: ReturnType<typeof gpuSpec>) =>
        Object.assign(s.devices[0]!.containerEdits, { intelRdt: { closID: "../x", enableMBM: true } }),
      'devices[0].containerEdits.intelRdt.closID: "../x" is not a directory name',
    ],
  ])("refuses %s in one line naming the file and field", (_, change, message) => {
    const spec = gpuSpec();
    change(spec);
    const file = write(0, "bad.json", spec);
    const e = errorOf(() => resolve(["nvidia.com/gpu=0"]));
    expect(e.code).toBe("ERR_DEVICE");
    expect(e.message).toContain(`CDI spec ${file}: ${message}`);
    expect(e.message).not.toContain("\n");
  });

  it("intelRdt: the spec's, replaced whole by a device's (a later edit wins, as CDI's library does)", () => {
    const spec = gpuSpec("nvidia.com/gpu", "0.7.0");
    Object.assign(spec.containerEdits, { intelRdt: { closID: "gpus", l3CacheSchema: "L3:0=ff", enableCMT: true } });
    Object.assign(spec.devices[1]!.containerEdits, { intelRdt: { closID: "gpu1", memBwSchema: "MB:0=50" } });
    write(0, "a.json", spec);
    expect(resolve(["nvidia.com/gpu=0"])?.intelRdt).toEqual({
      closID: "gpus",
      l3CacheSchema: "L3:0=ff",
      enableCMT: true,
    });
    expect(resolve(["nvidia.com/gpu=0", "nvidia.com/gpu=1"])?.intelRdt).toEqual({
      closID: "gpu1",
      memBwSchema: "MB:0=50",
    });
    expect(resolve(["nvidia.com/gpu=0"], {})).not.toHaveProperty("intelRdt.memBwSchema");
    write(0, "a.json", gpuSpec());
    expect(resolve(["nvidia.com/gpu=0"])).not.toHaveProperty("intelRdt");
  });

  it("refuses a missing device node when the device is used, naming its field", () => {
    const spec = gpuSpec();
    spec.devices[3]!.containerEdits.deviceNodes[0]!.hostPath = join(base, "nothere");
    const file = write(0, "gpu.json", spec);
    expect(resolve(["nvidia.com/gpu=0"])?.devices).toEqual(["nvidia.com/gpu=0"]);
    expect(errorOf(() => resolve(["nvidia.com/gpu=3"])).message).toBe(
      `CDI spec ${file}: devices[3].containerEdits.deviceNodes[0]: device node ${join(base, "nothere")} does not exist on this node`,
    );
  });

  it("refuses YAML that does not parse, and a spec root could be tricked by", () => {
    const file = write(0, "bad.yaml", "cdiVersion: [\n");
    expect(errorOf(() => resolve(["nvidia.com/gpu=0"])).message).toMatch(new RegExp(`^CDI spec ${file}: YAML: `));
    rmSync(file);
    const open = write(0, "gpu.json", gpuSpec());
    chmodSync(open, 0o666);
    expect(errorOf(() => loadCdiRegistry(dirs, true)).message).toBe(
      `CDI spec ${open}: (file): must be owned by root and writable by no one else`,
    );
    chmodSync(open, 0o644);
    chmodSync(dirs[0]!, 0o777);
    expect(errorOf(() => loadCdiRegistry(dirs, true)).message).toBe(
      `CDI spec ${dirs[0]}: (directory): must be owned by root and writable by no one else`,
    );
  });

  it("parses the edits every kind of field", () => {
    const spec = parseCdiSpec(
      JSON.stringify({
        cdiVersion: "0.7.0",
        kind: "vendor.com/class",
        devices: [
          {
            name: "x",
            containerEdits: {
              hooks: [
                { hookName: "createContainer", path: "/usr/bin/hook", args: ["hook", "a"], env: ["A=1"], timeout: 5 },
              ],
              additionalGIDs: [7],
            },
          },
        ],
      }),
      "/x.json",
    );
    expect(spec.devices[0]?.edits).toEqual({
      env: [],
      deviceNodes: [],
      mounts: [],
      additionalGids: [7],
      hooks: [{ hookName: "createContainer", path: "/usr/bin/hook", args: ["hook", "a"], env: ["A=1"], timeout: 5 }],
    });
  });
});

describe("device requests", () => {
  beforeEach(() => {
    write(0, "gpu.json", gpuSpec());
  });

  it("merges spec-wide edits once, device edits per device, gids without 0", () => {
    const edits = resolve(["nvidia.com/gpu=2", "nvidia.com/gpu=1"]);
    expect(edits).toMatchObject({
      devices: ["nvidia.com/gpu=2", "nvidia.com/gpu=1"],
      env: ["FAKE_DRIVER=1", "CUDA_VISIBLE_DEVICES=0,1"],
      additionalGids: [44],
      mounts: [{ hostPath: "/etc/hostname", containerPath: "/usr/lib/fake-driver.so", options: ["ro", "bind"] }],
    });
    expect(edits?.deviceNodes.map((n) => n.path)).toEqual(["/dev/gpu2", "/dev/gpu1"]);
  });

  it("=gres is the step's allocation, mapped by index (SLURM_STEP_GPUS first)", () => {
    const edits = resolve(["nvidia.com/gpu=gres"], { SLURM_STEP_GPUS: "1,3", CUDA_VISIBLE_DEVICES: "0,1" });
    expect(edits?.devices).toEqual(["nvidia.com/gpu=1", "nvidia.com/gpu=3"]);
    expect(edits?.deviceNodes.map((n) => n.path)).toEqual(["/dev/gpu1", "/dev/gpu3"]);
    expect(edits?.env).toContain("CUDA_VISIBLE_DEVICES=0,1");
    expect(resolve(["nvidia.com/gpu=gres"], { CUDA_VISIBLE_DEVICES: "2" })?.devices).toEqual(["nvidia.com/gpu=2"]);
  });

  it("refuses a device the step was not allocated, and =all beyond the allocation", () => {
    const env = { SLURM_STEP_GPUS: "0,1" };
    expect(errorOf(() => resolve(["nvidia.com/gpu=2"], env)).message).toBe(
      "--container-device nvidia.com/gpu=2: not allocated to this step (SLURM_STEP_GPUS lists 0,1); use nvidia.com/gpu=gres",
    );
    expect(errorOf(() => resolve(["nvidia.com/gpu=all"], env)).message).toMatch(/nvidia.com\/gpu=2: not allocated/);
    expect(resolve(["nvidia.com/gpu=all"])?.devices).toEqual([
      "nvidia.com/gpu=0",
      "nvidia.com/gpu=1",
      "nvidia.com/gpu=2",
      "nvidia.com/gpu=3",
    ]);
  });

  it("refuses unknown names, bad names and =gres with no allocation", () => {
    expect(errorOf(() => resolve(["nvidia.com/gpu=7"])).message).toBe(
      `--container-device nvidia.com/gpu=7: no CDI spec describes it (spec dirs: ${dirs.join(", ")})`,
    );
    expect(errorOf(() => resolve(["gpu0"])).message).toMatch(/not a CDI name/);
    expect(errorOf(() => resolve(["nvidia.com/gpu=gres"])).message).toMatch(/this step has no GPU allocation/);
    expect(errorOf(() => resolve(["nvidia.com/gpu=gres"], { SLURM_STEP_GPUS: "GPU-1" })).message).toMatch(
      /is not a GPU index/,
    );
  });

  it("site defaults: =gres only where Slurm allocated GPUs", () => {
    conf.defaults = ["nvidia.com/gpu=gres"];
    expect(resolve([])).toBeUndefined();
    expect(resolve([], { SLURM_STEP_GPUS: "3" })?.devices).toEqual(["nvidia.com/gpu=3"]);
  });

  it("maps by UUID when configured", () => {
    conf.gresMap = "uuid";
    expect(gresAllocation({ CUDA_VISIBLE_DEVICES: "GPU-a,GPU-b" }, "nvidia.com/gpu", "uuid")?.names).toEqual([
      "nvidia.com/gpu=GPU-a",
      "nvidia.com/gpu=GPU-b",
    ]);
    expect(gresAllocation({ SLURM_STEP_GPUS: "" }, "nvidia.com/gpu", "index")?.names).toEqual([]);
    expect(gresAllocation({}, "nvidia.com/gpu", "index")).toBeUndefined();
  });
});

describe("the allocation under Slurm (issue 40, item A)", () => {
  // A step srun started: slurmstepd sets SLURM_JOB_ID and SLURM_STEP_ID, and SLURM_STEP_GPUS only
  // when it allocated the step GPUs (it unsets it, and CUDA_VISIBLE_DEVICES, otherwise).
  const step = { SLURM_JOB_ID: "77", SLURM_STEP_ID: "0" };
  beforeEach(() => {
    write(0, "gpu.json", gpuSpec());
    write(0, "fpga.json", {
      cdiVersion: "0.6.0",
      kind: "acme.com/fpga",
      devices: [{ name: "f0", containerEdits: { deviceNodes: [{ path: "/dev/fpga0", hostPath: "/dev/null" }] } }],
    });
  });

  it("a step allocated no GPU gets none: a named GPU, =all and =gres are refused; a user's CUDA_VISIBLE_DEVICES or SLURM_JOB_GPUS is no allocation", () => {
    for (const env of [step, { ...step, CUDA_VISIBLE_DEVICES: "0,1" }, { ...step, SLURM_JOB_GPUS: "0,1,2,3" }]) {
      const named = errorOf(() => resolve(["nvidia.com/gpu=1"], env));
      expect(named.code).toBe("ERR_DEVICE");
      expect(named.message).toBe(
        "--container-device nvidia.com/gpu=1: not allocated to this step (Slurm allocated it no GPU: SLURM_STEP_GPUS is not set); ask Slurm for GPUs (--gres=gpu:N)",
      );
      expect(errorOf(() => resolve(["nvidia.com/gpu=all"], env)).message).toMatch(
        /^--container-device nvidia.com\/gpu=0: not allocated to this step \(Slurm allocated it no GPU/,
      );
      expect(errorOf(() => resolve(["nvidia.com/gpu=gres"], env)).message).toBe(
        "--container-device nvidia.com/gpu=gres: this step has no GPU allocation (Slurm set no SLURM_STEP_GPUS: ask it for GPUs with --gres=gpu:N)",
      );
    }
    // A kind other than CdiGresKind is not Slurm's to allocate.
    expect(resolve(["acme.com/fpga=f0"], step)?.devices).toEqual(["acme.com/fpga=f0"]);
    conf.defaults = ["nvidia.com/gpu=gres"];
    expect(resolve([], { ...step, CUDA_VISIBLE_DEVICES: "0,1" })).toBeUndefined();
  });

  it("a step with GPUs: SLURM_STEP_GPUS alone, whatever CUDA_VISIBLE_DEVICES says", () => {
    const env = { ...step, SLURM_STEP_GPUS: "2", CUDA_VISIBLE_DEVICES: "0,1" };
    expect(resolve(["nvidia.com/gpu=gres"], env)?.devices).toEqual(["nvidia.com/gpu=2"]);
    expect(errorOf(() => resolve(["nvidia.com/gpu=0"], env)).message).toBe(
      "--container-device nvidia.com/gpu=0: not allocated to this step (SLURM_STEP_GPUS lists 2); use nvidia.com/gpu=gres",
    );
  });

  it("the batch step (no SLURM_STEP_ID): SLURM_JOB_GPUS, as slurmstepd sets it there", () => {
    const env = { SLURM_JOB_ID: "77", SLURM_JOB_GPUS: "1,3", CUDA_VISIBLE_DEVICES: "0,1" };
    expect(resolve(["nvidia.com/gpu=gres"], env)?.devices).toEqual(["nvidia.com/gpu=1", "nvidia.com/gpu=3"]);
    expect(errorOf(() => resolve(["nvidia.com/gpu=0"], env)).message).toBe(
      "--container-device nvidia.com/gpu=0: not allocated to this step (SLURM_JOB_GPUS lists 1,3); use nvidia.com/gpu=gres",
    );
    expect(errorOf(() => resolve(["nvidia.com/gpu=0"], { SLURM_JOB_ID: "77" })).message).toMatch(
      /\(Slurm allocated it no GPU: SLURM_JOB_GPUS is not set\)/,
    );
  });
});

describe("what root takes from a spec (issue 40, item D)", () => {
  // Root makes these, so the test needs root; a run without it must fail, not pass vacuously.
  beforeEach(() => {
    expect(process.getuid?.(), "these tests chown and need root").toBe(0);
  });

  /** A spec of one device whose node is `hostPath`; returns the spec file. */
  const nodeAt = (hostPath: string) =>
    write(0, "gpu.json", {
      cdiVersion: "0.6.0",
      kind: "nvidia.com/gpu",
      devices: [{ name: "0", containerEdits: { deviceNodes: [{ path: "/dev/gpu0", hostPath }] } }],
    });
  const nodeProblem = (node: string, problem: string) =>
    `device node ${node}: ${problem}; as root jobrt takes a host path only through directories root alone may write`;
  const refusal = (file: string, node: string, problem: string) =>
    `CDI spec ${file}: devices[0].containerEdits.deviceNodes[0]: ${nodeProblem(node, problem)}`;

  it("refuses a device node through a directory others may write, or one a job user owns; a sticky one is fine", () => {
    const open = join(base, "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    symlinkSync("/dev/null", join(open, "gpu0"));
    const file = nodeAt(join(open, "gpu0"));
    const e = errorOf(() => resolve(["nvidia.com/gpu=0"], {}, true));
    expect(e.code).toBe("ERR_DEVICE");
    expect(e.message).toBe(refusal(file, join(open, "gpu0"), `${open} is writable by others than root (mode 777)`));
    // Not as root: the user's own paths are the user's business.
    expect(resolve(["nvidia.com/gpu=0"], {}, false)?.devices).toEqual(["nvidia.com/gpu=0"]);
    // jobrt check says it as a problem of the node's specs.
    expect(cdiInventory({ specDirs: dirs }, true).problems).toEqual([
      `CDI spec ${file}: nvidia.com/gpu=0: ${nodeProblem(join(open, "gpu0"), `${open} is writable by others than root (mode 777)`)}`,
    ]);
    chmodSync(open, 0o1777);
    expect(resolve(["nvidia.com/gpu=0"], {}, true)?.deviceNodes[0]?.hostPath).toBe(join(open, "gpu0"));
    const users = join(base, "users");
    mkdirSync(users, { mode: 0o755 });
    symlinkSync("/dev/null", join(users, "gpu0"));
    chownSync(users, 65534, 65534);
    nodeAt(join(users, "gpu0"));
    expect(errorOf(() => resolve(["nvidia.com/gpu=0"], {}, true)).message).toBe(
      refusal(file, join(users, "gpu0"), `${users} belongs to uid 65534, not root`),
    );
  });

  it("follows symlinks as the kernel would: a root-owned link into a job user's directory is refused there", () => {
    const users = join(base, "users");
    mkdirSync(users, { mode: 0o755 });
    symlinkSync("/dev/zero", join(users, "node"));
    chownSync(users, 65534, 65534);
    const safe = join(base, "safe");
    mkdirSync(safe, { mode: 0o755 });
    symlinkSync("../users", join(safe, "to-users"));
    const file = nodeAt(join(safe, "to-users", "node"));
    expect(errorOf(() => resolve(["nvidia.com/gpu=0"], {}, true)).message).toBe(
      refusal(file, join(safe, "to-users", "node"), `${users} belongs to uid 65534, not root`),
    );
    // A link the job user owns, in a directory of root's, is refused too: it is theirs to aim.
    execFileSync("ln", ["-s", "/dev/zero", join(safe, "theirs")]);
    execFileSync("chown", ["-h", "65534", join(safe, "theirs")]);
    nodeAt(join(safe, "theirs"));
    expect(errorOf(() => resolve(["nvidia.com/gpu=0"], {}, true)).message).toBe(
      refusal(file, join(safe, "theirs"), `${join(safe, "theirs")} belongs to uid 65534, not root`),
    );
  });

  it("refuses a mount source through a directory others may write, naming the mount", () => {
    const open = join(base, "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    writeFileSync(join(open, "libfake.so"), "");
    const spec = gpuSpec();
    spec.containerEdits.mounts[0]!.hostPath = join(open, "libfake.so");
    const file = write(0, "gpu.json", spec);
    const problem = `mount source ${join(open, "libfake.so")}: ${open} is writable by others than root (mode 777); as root jobrt takes a host path only through directories root alone may write`;
    expect(errorOf(() => resolve(["nvidia.com/gpu=0"], {}, true)).message).toBe(
      `CDI spec ${file}: containerEdits.mounts[0]: ${problem}`,
    );
    expect(cdiInventory({ specDirs: dirs }, true).problems).toContain(`CDI spec ${file}: nvidia.com/gpu=0: ${problem}`);
    expect(resolve(["nvidia.com/gpu=0"], {}, false)?.mounts).toEqual([
      { hostPath: join(open, "libfake.so"), containerPath: "/usr/lib/fake-driver.so", options: ["ro", "bind"] },
    ]);
  });

  it("refuses a spec dir below a directory others may write", () => {
    const open = join(base, "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    const dir = join(open, "cdi");
    mkdirSync(dir, { mode: 0o755 });
    expect(errorOf(() => loadCdiRegistry([dir], true)).message).toBe(
      `CDI spec ${dir}: (directory): ${open} is writable by others than root (mode 777): root reads specs only through directories root alone may write`,
    );
  });

  it("refuses a spec file over 1 MiB, as jobrt.conf, and a FIFO, without blocking on it", () => {
    const big = gpuSpec() as ReturnType<typeof gpuSpec> & { annotations?: unknown };
    big.annotations = { padding: "x".repeat(1024 * 1024) };
    const file = write(0, "gpu.json", big);
    const size = statSync(file).size;
    expect(errorOf(() => resolve(["nvidia.com/gpu=0"])).message).toBe(
      `CDI spec ${file}: (file): is ${size} bytes, more than the 1048576-byte (1 MiB) limit for a configuration file`,
    );
    rmSync(file);
    const fifo = join(dirs[0]!, "gpu.yaml");
    execFileSync("mkfifo", ["-m", "0644", fifo]);
    expect(errorOf(() => resolve(["nvidia.com/gpu=0"])).message).toBe(
      `CDI spec ${fifo}: (file): is not a regular file`,
    );
  });
});

describe("jobrt.conf device keys", () => {
  const site = (text: string) => {
    writeFileSync(join(base, "jobrt.conf"), text);
    return loadSiteConfig(base);
  };
  it("defaults, and each key read", () => {
    expect(site("").devices).toEqual({
      specDirs: ["/etc/cdi", "/var/run/cdi"],
      defaults: [],
      gresKind: "nvidia.com/gpu",
      gresMap: "index",
    });
    expect(
      site("CdiSpecDirs=/a,/b\nCdiDefaultDevices=amd.com/gpu=gres\nCdiGresKind=amd.com/gpu\nCdiGresMap=UUID\n").devices,
    ).toEqual({
      specDirs: ["/a", "/b"],
      defaults: ["amd.com/gpu=gres"],
      gresKind: "amd.com/gpu",
      gresMap: "uuid",
    });
  });
  it.each([
    ["CdiSpecDirs=/a,cdi", 'CdiSpecDirs: "cdi" must be an absolute path'],
    ["CdiGresKind=gpu", 'CdiGresKind: "gpu" is not a CDI kind (vendor.com/class)'],
    ["CdiGresMap=minor", 'CdiGresMap: "minor" is not one of index, uuid'],
  ])("%s is refused at its line", (line, message) => {
    expect(errorOf(() => site(`${line}\n`)).message).toContain(`jobrt.conf:1:`);
    expect(errorOf(() => site(`${line}\n`)).message).toContain(message);
  });
});
