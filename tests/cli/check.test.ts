/**
 * `jobrt check` looks at what this node can see of a request (issue 26, item 5), and `jobrt
 * runtimes` lists each runtime's tools: the built CLI, real runc, a real busybox bundle.
 */
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, closeSync, cpSync, existsSync, mkdirSync, openSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { faultPluginDir } from "../faults/faultplugin.js";
import { jobrt, jobrtBin, requires, tempDir } from "../helpers/jobrt.js";
import { NO_STEP } from "../helpers/mpicheck.js";

const runcVersion = /runc version (\S+)/.exec(spawnSync("runc", ["--version"], { encoding: "utf8" }).stdout ?? "")?.[1];
const runcPath = spawnSync("sh", ["-c", "command -v runc"], { encoding: "utf8" }).stdout.trim();

const ID = "%n.%u.%j.%s.%t";

const STEP = { SLURM_JOB_ID: "3737", SLURM_STEP_ID: "0", SLURM_PROCID: "0", SLURM_LOCALID: "0", SLURM_NTASKS: "1" };
const PMI2 = { ...STEP, SLURM_MPI_TYPE: "pmi2", PMI_FD: "3", PMI_RANK: "0", PMI_SIZE: "2" };

/** `jobrt check` as a task of a Slurm step would run it: the step's environment, `fd3` as its descriptor 3. */
async function checkInStep(args: string[], env: Record<string, string>, fd3: "pipe" | "ignore" | number) {
  const conf = site(ociConf("runc"));
  const child = spawn(process.execPath, ["--", jobrtBin, "check", ...args], {
    env: { ...conf.env, ...env },
    stdio: ["ignore", "pipe", "pipe", fd3],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
  });
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  (child.stdio[3] as Readable | null)?.resume();
  const code = await new Promise<number | null>((r) => child.once("close", (c) => r(c)));
  return { stdout, stderr, code };
}
function ociConf(runc: string): string {
  const g = `${runc} --root /run/runc`;
  return `RunTimeQuery="${g} state ${ID}"\nRunTimeRun="${g} run ${ID} -b %b"\nRunTimeKill="${g} kill -a ${ID}"\nRunTimeDelete="${g} delete --force ${ID}"\n`;
}

/** A conf dir with a private SpoolDir and, optionally, oci.conf. */
function site(oci?: string): { dir: string; env: NodeJS.ProcessEnv } {
  const dir = tempDir("jobrt-check-conf-");
  const spool = tempDir("jobrt-check-spool-");
  chmodSync(spool, 0o755);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\n`);
  if (oci !== undefined) writeFileSync(join(dir, "oci.conf"), oci);
  return { dir, env: { ...process.env, JOBRT_CONF_DIR: dir } };
}

describe("jobrt check: what this node can see", () => {
  requires({ runc: runcVersion !== undefined, "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });
  let bundle: string;
  beforeAll(() => {
    bundle = busyboxBundle(join(tempDir("jobrt-check-bundle-"), "bundle"));
  });

  it("a real bundle: runc with its path and version, the bundle, config.json and rootfs, all ok", async () => {
    const s = site(ociConf("runc"));
    const r = await jobrt(["check", "--container", bundle, "true"], { env: s.env });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const oci = join(s.dir, "oci.conf");
    expect(r.stdout).toBe(
      [
        `component 0: runtime oci: tool runc (RunTimeQuery, RunTimeRun, RunTimeKill, RunTimeDelete in ${oci}): ok: ${runcPath}, version ${runcVersion}`,
        `component 0: runtime oci: bundle ${bundle}: ok: a directory`,
        `component 0: runtime oci: ${bundle}/config.json: ok: parses, names root.path`,
        `component 0: runtime oci: rootfs ${bundle}/rootfs: ok: a directory`,
        "component 0: runtime oci: ok",
        NO_STEP,
        "",
      ].join("\n"),
    );
  });

  it("a bundle that does not exist on this node fails, naming it", async () => {
    const s = site(ociConf("runc"));
    const missing = join(tempDir(), "no-such-bundle");
    const marker = join(tempDir(), "started");
    const r = await jobrt(["check", "--container", missing, "sh", "-c", `touch ${marker}`], { env: s.env });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `jobrt: component 0: runtime oci: bundle ${missing}: failed: no such directory on this node (--container names an OCI bundle directory)\njobrt: component 0: runtime oci: failed (1 problem on this node)\n`,
    );
    expect(existsSync(marker)).toBe(false);
  });

  it("a config.json that does not parse fails with the file and JSON's complaint", async () => {
    const s = site(ociConf("runc"));
    const copy = join(tempDir(), "bundle");
    mkdirSync(join(copy, "rootfs"), { recursive: true });
    writeFileSync(join(copy, "config.json"), '{"ociVersion": "1.0.2", "root": {"path": "rootfs"');
    const r = await jobrt(["check", "--container", copy, "true"], { env: s.env });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`component 0: runtime oci: bundle ${copy}: ok: a directory\n`);
    expect(r.stderr).toMatch(
      new RegExp(
        `^jobrt: component 0: runtime oci: ${copy}/config.json: failed: ${copy}/config.json: not valid JSON: .+\\njobrt: component 0: runtime oci: failed \\(1 problem on this node\\)\\n$`,
      ),
    );
  });

  it("a config.json that is a FIFO fails at once, in check and in run (a synchronous open of it blocked jobrt for good)", async () => {
    const s = site(ociConf("runc"));
    const copy = join(tempDir(), "bundle");
    mkdirSync(join(copy, "rootfs"), { recursive: true });
    spawnSync("mkfifo", [join(copy, "config.json")]);
    const check = await jobrt(["check", "--container", copy, "true"], { env: s.env, timeoutMs: 15_000 });
    expect(check.signal).toBeNull();
    expect(check.code).toBe(1);
    expect(check.stderr).toContain(
      `jobrt: component 0: runtime oci: ${copy}/config.json: failed: ${copy}/config.json is not a regular file\n`,
    );
    const run = await jobrt(["run", "--container", copy, "true"], { env: s.env, timeoutMs: 15_000 });
    expect(run.signal).toBeNull();
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`cannot read ${copy}/config.json: ${copy}/config.json is not a regular file`);
  });

  it("a config.json whose rootfs is missing fails on the rootfs", async () => {
    const s = site(ociConf("runc"));
    const copy = join(tempDir(), "bundle");
    mkdirSync(copy);
    cpSync(join(bundle, "config.json"), join(copy, "config.json"));
    const r = await jobrt(["check", "--container", copy, "true"], { env: s.env });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `jobrt: component 0: runtime oci: rootfs ${copy}/rootfs: failed: no such directory on this node (root.path in ${copy}/config.json)\n`,
    );
  });

  it("a runc that oci.conf names but this node lacks fails as a missing tool", async () => {
    const gone = join(tempDir(), "bin/runc");
    const s = site(ociConf(gone));
    const r = await jobrt(["check", "--container", bundle, "true"], { env: s.env });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `jobrt: component 0: runtime oci: tool runc (RunTimeQuery, RunTimeRun, RunTimeKill, RunTimeDelete in ${join(s.dir, "oci.conf")}): failed: ${gone} does not exist\n`,
    );
    expect(r.stdout).toContain(`bundle ${bundle}: ok`);
  });

  it("a command whose program is a pattern is said to be not checked", async () => {
    const s = site(ociConf("runc").replace(/RunTimeKill="runc/, 'RunTimeKill="%m/runc'));
    const r = await jobrt(["check", "--container", bundle, "true"], { env: s.env });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("component 0: runtime oci: RunTimeKill program: not checked: the first word of");
    expect(r.stdout).toContain("component 0: runtime oci: ok (1 not checked)\n");
  });

  it("a bundle dir only root can read is looked at as the job user (--uid) and not seen", async () => {
    const s = site(ociConf("runc"));
    const parent = tempDir();
    chmodSync(parent, 0o700);
    const hidden = join(parent, "bundle");
    cpSync(bundle, hidden, { recursive: true });
    chmodSync(s.dir, 0o755);
    const r = await jobrt(["check", "--uid", "65534", "--gid", "65534", "--container", hidden, "true"], {
      env: s.env,
      cwd: "/",
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `jobrt: component 0: runtime oci: bundle ${hidden}: failed: EACCES: permission denied, open '${hidden}/.' (looked at as uid 65534)\n`,
    );
  });

  it("outside a Slurm step: one line saying there is no MPI wire-up, and the check still passes", async () => {
    const r = await jobrt(["check", "--runtime", "none", "true"], { env: site().env });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`component 0: runtime none: ok\n${NO_STEP}\n`);
  });

  it("a pmi2 step with a real socket at PMI_FD: none passes it at its number, oci at 3; oci's containers are asked for the host's namespaces", async () => {
    const env = { ...PMI2, SLURM_STEP_TASKS_PER_NODE: "2", SLURM_NODEID: "0" };
    const r = await checkInStep(
      ["--runtime", "none", "true", ":", "--runtime", "oci", "--container", bundle, "true"],
      env,
      "pipe",
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      "\nmpi: wire-up: ok: pmi2 (SLURM_MPI_TYPE=pmi2; PMI_RANK=0, PMI_SIZE=2)\nmpi: PMI_FD: ok: 3, an open socket\n",
    );
    expect(r.stdout).toMatch(/\nmpi: \/dev\/shm: ok: tmpfs, \d+\.\d GiB \(\d+\.\d GiB free\), /);
    expect(r.stdout).toMatch(/\nmpi: user namespace: ok: user:\[\d+\], /);
    expect(r.stdout).toContain(
      '\ncomponent 0: mpi: runtime none: PMI-2 socket: ok: passed to the task at PMI_FD=3 (capability "pmi-fd")\n',
    );
    expect(r.stdout).toContain(
      '\ncomponent 1: mpi: runtime oci: PMI-2 socket: ok: passed to the task at PMI_FD=3 (capability "pass-fds")\n',
    );
    // The tests run as root: root's containers share the host's namespaces (docs/mpi.md).
    expect(r.stdout).toContain(
      "\ncomponent 1: mpi: runtime oci: /dev/shm and user namespace: ok: runtime oci's containers are asked for the host's network, IPC, PID and UTS namespaces and /dev/shm (2 ranks on this node), so shared memory and CMA work between them (unless a site conf declines, docs/mpi.md)\n",
    );
    expect(r.stderr).toBe("");
  });

  it("a PMI_FD that names a file, not a socket, is the refusal exec would give, with its fix", async () => {
    const file = join(tempDir(), "not-a-socket");
    writeFileSync(file, "");
    const fd = openSync(file, "r");
    try {
      const r = await checkInStep(["--runtime", "none", "true"], PMI2, fd);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        "jobrt: mpi: PMI_FD: failed: MPI wire-up: PMI_FD=3 is not a socket, so it is not Slurm's PMI-2 connection; jobrt exec refuses this step; fix: start jobrt straight from srun (nothing between them may close PMI_FD), or srun --mpi=pmix\njobrt: mpi: failed (1 problem with this step's wire-up)\n",
      );
    } finally {
      closeSync(fd);
    }
  });

  it("a pmix step: its directories checked and bound into oci's containers; a missing one is named, and refused", async () => {
    const server = tempDir("jobrt-check-pmix-");
    const missing = join(tempDir(), "no-system-tmpdir");
    const env = {
      ...STEP,
      SLURM_MPI_TYPE: "pmix",
      PMIX_NAMESPACE: "slurm.pmix.37.0",
      PMIX_RANK: "0",
      PMIX_SERVER_URI41: "pmix-server.1;tcp4://127.0.0.1:1",
      PMIX_SERVER_TMPDIR: server,
      PMIX_SYSTEM_TMPDIR: missing,
      SLURM_STEP_TASKS_PER_NODE: "1(x2)",
      SLURM_NODEID: "1",
    };
    const r = await checkInStep(
      ["--runtime", "none", "true", ":", "--runtime", "oci", "--container", bundle, "true"],
      env,
      "ignore",
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(
      `\nmpi: wire-up: ok: pmix (SLURM_MPI_TYPE=pmix; PMIX_NAMESPACE=slurm.pmix.37.0, PMIX_RANK=0)\nmpi: PMIx server: ok: PMIX_SERVER_URI41=pmix-server.1;tcp4://127.0.0.1:1\nmpi: PMIX_SERVER_TMPDIR: ok: ${server}: a directory this user can reach\n`,
    );
    expect(r.stdout).toContain(
      "\ncomponent 0: mpi: runtime none: PMIx directories: ok: the task sees them as this process does\n",
    );
    expect(r.stderr).toBe(
      [
        `jobrt: mpi: PMIX_SYSTEM_TMPDIR: failed: ${missing}: no such directory on this node; fix: SlurmdSpoolDir / TmpFS must exist on every node`,
        `jobrt: component 1: mpi: runtime oci: PMIx directories: failed: jobrt exec refuses: MPI wire-up: PMIX_SYSTEM_TMPDIR=${missing} does not exist, so the PMIx directories cannot be bound into the container`,
        "jobrt: mpi: failed (2 problems with this step's wire-up)",
        "",
      ].join("\n"),
    );
    const system = tempDir("jobrt-check-pmix-system-");
    const bound = await checkInStep(
      ["--runtime", "oci", "--container", bundle, "true"],
      { ...env, PMIX_SYSTEM_TMPDIR: system },
      "ignore",
    );
    expect(bound.stderr).toBe("");
    expect(bound.code).toBe(0);
    const [outer, inner] = [server, system].sort((a, b) => a.length - b.length);
    expect(bound.stdout).toContain(
      `\ncomponent 0: mpi: runtime oci: PMIx directories: ok: bound into runtime oci's container at the same paths: ${outer}, ${inner}\n`,
    );
    expect(bound.stdout).toContain(
      "\ncomponent 0: mpi: runtime oci: /dev/shm and user namespace: ok: each task is its own container, but this node has one rank of the step: nothing to share\n",
    );
    // Without --container no request carries the binds into the container: refused, as exec refuses it.
    const bare = await checkInStep(["--runtime", "oci", "true"], { ...env, PMIX_SYSTEM_TMPDIR: system }, "ignore");
    expect(bare.code).toBe(1);
    expect(bare.stderr).toContain(
      "jobrt: component 0: mpi: runtime oci: PMIx directories: failed: jobrt exec refuses: MPI wire-up: runtime oci runs its tasks in a sandbox of its own, and a step without --container gives it no container request through which the host binds Slurm's PMIx directories",
    );
  });

  it("a bundle reached through a symlink is followed, as runc follows it", async () => {
    const s = site(ociConf("runc"));
    const link = join(tempDir(), "link");
    symlinkSync(bundle, link);
    const r = await jobrt(["check", "--container", link, "true"], { env: s.env });
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain(`component 0: runtime oci: bundle ${link}: ok: a directory\n`);
    expect(r.stdout).toContain(`component 0: runtime oci: rootfs ${link}/rootfs: ok: a directory\n`);
  });
});

describe("a third-party runtime without the tools and check hooks (written before them)", () => {
  it("still loads: runtimes says its tools are not reported, check that it validated only", async () => {
    const s = site();
    writeFileSync(join(s.dir, "jobrt.conf"), `PluginDir=${faultPluginDir()}\nRuntimePlugins=fault\n`);
    const list = await jobrt(["runtimes"], { env: s.env });
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/\nfault +- +- +not reported \(the runtime has no tools hook\)\n/);
    const json = JSON.parse((await jobrt(["runtimes", "--json"], { env: s.env })).stdout) as {
      runtimes: Record<string, unknown>[];
    };
    expect(json.runtimes[0]).toMatchObject({ name: "fault", compatible: true });
    expect(json.runtimes[0]).not.toHaveProperty("tools");
    const r = await jobrt(["check", "--runtime", "fault", "true"], { env: s.env });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      `component 0: runtime fault: ok (validated only: the runtime has no check hook, so nothing on this node was looked at)\n${NO_STEP}\n`,
    );
  });
});

describe("jobrt runtimes: each runtime's tools", () => {
  requires({ runc: runcVersion !== undefined, "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });

  it("runc from oci.conf with path and version, shifter's tools missing, none with no tool", async () => {
    const s = site(ociConf("runc"));
    writeFileSync(
      join(s.dir, "shifter.conf"),
      `ShifterPath=${join(s.dir, "no-shifter")}\nShifterimgPath=${join(s.dir, "no-shifterimg")}\n`,
    );
    const r = await jobrt(["runtimes", "--json"], { env: s.env });
    const list = JSON.parse(r.stdout) as { runtimes: { name: string; tools?: unknown[] }[] };
    const tools = Object.fromEntries(list.runtimes.map((x) => [x.name, x.tools]));
    const oci = join(s.dir, "oci.conf");
    expect(tools.oci).toEqual([
      {
        name: "runc",
        source: `RunTimeQuery, RunTimeRun, RunTimeKill, RunTimeDelete in ${oci}`,
        path: runcPath,
        version: runcVersion,
      },
    ]);
    expect(tools.none).toEqual([]);
    expect(tools.shifter).toEqual([
      {
        name: "shifter",
        source: `${join(s.dir, "shifter.conf")}:1 ShifterPath`,
        path: join(s.dir, "no-shifter"),
        problem: `${join(s.dir, "no-shifter")} does not exist: install Shifter or set ShifterPath in shifter.conf`,
      },
      {
        name: "shifterimg",
        source: `${join(s.dir, "shifter.conf")}:2 ShifterimgPath`,
        path: join(s.dir, "no-shifterimg"),
        problem: `${join(s.dir, "no-shifterimg")} does not exist: install Shifter or set ShifterimgPath in shifter.conf`,
      },
    ]);
    const text = await jobrt(["runtimes"], { env: s.env });
    expect(text.stdout).toMatch(
      new RegExp(`\\noci +runc +${runcVersion!.replace(/[.+]/g, "\\$&")} +${runcPath} \\(RunTimeQuery`),
    );
    expect(text.stdout).toMatch(/\nshifter +shifter +- +MISSING: .*no-shifter does not exist/);
    expect(text.stdout).toMatch(/\nnone +\(none\) +- +runs no program of its own\n/);
  });
});
