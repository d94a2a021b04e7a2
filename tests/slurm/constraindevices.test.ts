import { spawnSync } from "node:child_process";
import { appendFileSync, chmodSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { createStandinSite, type StandinSite } from "../shifter/standin/layout.js";
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
  waitFor,
  withoutAllocation,
} from "./cluster.js";

const here = dirname(fileURLToPath(import.meta.url));

// Issue 27, "exactly the allocation", for every runtime (docs/devices.md, "Where only the
// allocation is enforced"): the two-node local Slurm with task/cgroup and ConstrainDevices=yes,
// 4 fake GPUs per node. Each is a character device of major 240, which no driver serves: an open
// the device cgroup allows fails with ENXIO, one it refuses with EPERM (tests/oci/devices.test.ts).
// Every task of `srun --gres=gpu:2` writes to all four, which each runtime shows it: the two of its
// step open (ENXIO), the cgroup refuses the two others (EPERM).

/** One line per task: its node, its step's GPUs, and what writing to each of DIR/gpu0..3 gave. */
const PROBE =
  'out="$SLURMD_NODENAME step=$SLURM_STEP_GPUS"; for i in 0 1 2 3; do f="$1/gpu$i"; if [ ! -e "$f" ]; then r=absent; elif (: >"$f") 2>/dev/null; then r=opened; else r=$( (: >"$f") 2>&1 | sed "s/.*: //"); fi; out="$out gpu$i=$r"; done; echo "$out"';

/** The probe's lines with errno names, sorted. */
function outcomes(stdout: string): string[] {
  return sortedLines(
    stdout.replace(/=No such device or address/g, "=ENXIO").replace(/=Operation not permitted/g, "=EPERM"),
  );
}

/** What each line must say: the step's own GPUs open (ENXIO), every other one is there and refused. */
function expected(line: string): string {
  const [node, step] = line.split(" ") as [string, string];
  const given = step.replace(/^step=/, "").split(",");
  const gpus = [0, 1, 2, 3].map((i) => {
    const seen = new RegExp(` gpu${i}=(\\S+)`).exec(line)?.[1];
    const ok = seen === (given.includes(String(i)) ? "ENXIO" : "EPERM");
    return `gpu${i}=${ok ? seen : `${seen}(wrong)`}`;
  });
  return [node, step, ...gpus].join(" ");
}

interface Case {
  name: string;
  /** jobrt exec's options before `--`. */
  exec: () => string[];
  /** Where the task finds gpu0..gpu3. */
  dir: () => string;
  /** Run as the job user nobody (srun --uid). */
  asUser?: boolean;
}

describe("ConstrainDevices=yes: every runtime's tasks open exactly their step's GPUs", () => {
  let site: JobrtSite;
  let shifter: StandinSite;
  let base: string;
  let devs: string;
  let bundle: string;
  let allowAll: string;
  let rootless: string;

  beforeAll(async () => {
    site = jobrtSite();
    shifter = createStandinSite();
    shifter.addImage("docker:busybox:latest");
    base = tempDir("jobrt-slurm-constrain-");
    chmodSync(base, 0o755);
    devs = join(base, "dev");
    mkdirSync(devs, { mode: 0o755 });
    const specs = join(base, "cdi");
    mkdirSync(specs);
    const devices = [0, 1, 2, 3].map((i) => {
      const r = spawnSync("mknod", ["-m", "0666", join(devs, `gpu${i}`), "c", "240", String(i)]);
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
    // The same four nodes as a kind the allocation check does not cover: `=all` gives a container
    // every one, so only the step's cgroup can refuse the two the step was not allocated.
    writeFileSync(join(specs, "raw.json"), JSON.stringify({ cdiVersion: "0.6.0", kind: "jobrt.test/raw", devices }));
    // The examples installed as a site installs third-party runtimes (writing-a-runtime.md);
    // PluginDir is then where every runtime is found.
    const plugins = join(site.root, "plugins");
    mkdirSync(join(plugins, "node_modules/@jobrt"), { recursive: true });
    for (const name of ["bwrap", "charliecloud"])
      symlinkSync(
        resolve(here, `../../examples/jobrt-runtime-${name}`),
        join(plugins, `node_modules/jobrt-runtime-${name}`),
      );
    for (const name of ["none", "oci", "shifter"])
      symlinkSync(
        resolve(here, `../../packages/runtime-${name}`),
        join(plugins, `node_modules/@jobrt/runtime-${name}`),
      );
    for (const node of ["nodea", "nodeb"]) {
      const etc = join(site.root, "etc", node);
      appendFileSync(
        join(etc, "jobrt.conf"),
        `CdiSpecDirs=${specs}\nRuntimePlugins=none,oci,bwrap,charliecloud,shifter\nPluginDir=${plugins}\n`,
      );
      writeFileSync(join(etc, "shifter.conf"), readFileSync(join(shifter.confDir, "shifter.conf")));
    }
    bundle = busyboxBundle(join(base, "bundle"));
    allowAll = busyboxBundle(join(base, "allow-all"));
    const config = JSON.parse(readFileSync(join(allowAll, "config.json"), "utf8"));
    config.linux.resources.devices = [{ allow: true, access: "rwm" }];
    writeFileSync(join(allowAll, "config.json"), JSON.stringify(config));
    rootless = busyboxBundle(join(base, "rootless"), true);
    await startCluster(2, undefined, "linuxproc", { count: 4, files: `${devs}/gpu[0-3]` }, true);
  });
  stopClusterAfterAll(() => {
    if (site && base) removeRuncContainers([base, site.spoolRoot]);
    if (site) rmSync(site.root, { recursive: true, force: true });
    shifter?.remove();
    if (base) rmSync(base, { recursive: true, force: true });
  });

  // /home: a directory every image here has (a rootless runc cannot make a mount target).
  const volume = () => ["--container-volume", `${devs}:/home`];
  const cases: Case[] = [
    { name: "none (a plain task)", exec: () => ["--runtime", "none"], dir: () => devs },
    {
      name: "oci as root, the step's GPUs given (--container-device nvidia.com/gpu=gres), all four bound in",
      exec: () => ["--runtime", "oci", "--container", bundle, "--container-device", "nvidia.com/gpu=gres", ...volume()],
      dir: () => "/home",
    },
    {
      name: "oci as root, the bundle's own rules (runc spec: deny all), all four bound in",
      exec: () => ["--runtime", "oci", "--container", bundle, ...volume()],
      dir: () => "/home",
    },
    {
      name: "oci as root, a bundle that allows every device, all four bound in",
      exec: () => ["--runtime", "oci", "--container", allowAll, ...volume()],
      dir: () => "/home",
    },
    {
      name: "oci as a job user (srun --uid nobody, rootless runc), all four bound in",
      exec: () => ["--runtime", "oci", "--container", rootless, ...volume()],
      dir: () => "/home",
      asUser: true,
    },
    {
      // bwrap's --bind is nodev: device nodes are given with --dev-bind, i.e. as CDI devices.
      name: "the bwrap example, all four given (--container-device jobrt.test/raw=all)",
      exec: () => [
        "--runtime",
        "bwrap",
        "--container",
        join(bundle, "rootfs"),
        "--container-device",
        "jobrt.test/raw=all",
      ],
      dir: () => "/dev",
    },
    {
      name: "the charliecloud example, all four bound in",
      exec: () => ["--runtime", "charliecloud", "--container", join(bundle, "rootfs"), ...volume()],
      dir: () => "/home",
    },
    {
      name: "shifter (the stand-in), as a job user: the host's /tmp, all four there",
      exec: () => ["--runtime", "shifter", "--container", "docker:busybox:latest"],
      dir: () => devs,
      asUser: true,
    },
  ];

  it.each(cases)("$name: srun -N 2 -n 4 --gres=gpu:2", { timeout: 180_000 }, async (c) => {
    const user = c.asUser ? ["--uid=65534", "--gid=65534", "--chdir", base] : [];
    // srun --uid cannot read its allocation reply if the job had to queue: start on an idle cluster.
    expect(await waitFor(async () => (await slurm(["squeue", "-h"])).stdout.trim() === "", 30_000, 200)).toBe(true);
    const r = await slurm(
      [
        "srun",
        "-N",
        "2",
        "-n",
        "4",
        "--gres=gpu:2",
        ...user,
        "jobrt",
        "exec",
        ...c.exec(),
        "--",
        "sh",
        "-c",
        PROBE,
        "sh",
        c.dir(),
      ],
      { env: site.env, timeoutMs: 150_000 },
    );
    expect(withoutAllocation(r.stderr)).toBe("");
    expect(r.code).toBe(0);
    const lines = outcomes(r.stdout);
    expect(lines.map((l) => l.split(" ")[0])).toEqual(["nodea", "nodea", "nodeb", "nodeb"]);
    expect(lines.every((l) => /^\S+ step=\d+,\d+ /.test(l))).toBe(true);
    expect(lines).toEqual(lines.map(expected));
  });
});
