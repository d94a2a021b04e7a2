/**
 * The runtime/oci cells of the fault matrix: the built jobrt, real runc, busybox bundles. Each
 * cell checks the exit status and the line(s) docs/reliability.md promises, and ends with the same
 * leak check (no process, container, spool dir or temp file). Control-command time-outs are
 * shortened through $JOBRT_OCI_TIMEOUTS so that a hanging command is seen within seconds.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { busyboxBundle, busyboxRootfs } from "../helpers/fixtures.js";
import { failureLine, jobrt, jobrtBin, requires } from "../helpers/jobrt.js";
import {
  type FaultSite,
  expectNoLeaks,
  faultSite,
  markedProcesses,
  runcContainers,
  waitFor,
} from "../helpers/leaks.js";

const haveRunc = spawnSync("runc", ["--version"]).status === 0;
const isRoot = process.getuid?.() === 0;

const RUNC = "runc --root /run/runc";
type Key = "RunTimeQuery" | "RunTimeRun" | "RunTimeCreate" | "RunTimeStart" | "RunTimeKill" | "RunTimeDelete";

let seq = 0;
/** oci.conf for one cell: runc with a container id that is ours alone, some keys replaced. */
function ociConf(
  mode: "run" | "create-start",
  replace: Partial<Record<Key, string>> = {},
  extra = "",
): { text: string; tag: string } {
  const tag = `jfoci${process.pid}x${++seq}`;
  const id = `${tag}.%j.%s.%t`;
  const keys: Partial<Record<Key, string>> =
    mode === "run"
      ? {
          RunTimeQuery: `${RUNC} state ${id}`,
          RunTimeRun: `${RUNC} run ${id} -b %b`,
          RunTimeKill: `${RUNC} kill -a ${id}`,
          RunTimeDelete: `${RUNC} delete --force ${id}`,
        }
      : {
          RunTimeQuery: `${RUNC} state ${id}`,
          RunTimeCreate: `${RUNC} create ${id} -b %b`,
          RunTimeStart: `${RUNC} start ${id}`,
          RunTimeKill: `${RUNC} kill -a ${id}`,
          RunTimeDelete: `${RUNC} delete --force ${id}`,
        };
  Object.assign(keys, replace);
  const text = Object.entries(keys)
    .map(([k, v]) => `${k}="${(v as string).replace(/\\/g, "\\\\").replace(/#/g, "\\#")}"`)
    .join("\n");
  return { text: `${text}\n${extra}`, tag };
}

function ociSite(conf: { text: string }): FaultSite & { bundle: string } {
  const site = faultSite("", { "oci.conf": conf.text });
  return { ...site, bundle: busyboxBundle(join(site.dir, "bundle")) };
}

/** A bundle whose config.json is `text` (the rootfs is the shared busybox one). */
function bundleWith(site: FaultSite, text: string): string {
  const b = join(site.dir, "custom-bundle");
  mkdirSync(b);
  writeFileSync(join(b, "config.json"), text);
  symlinkSync(busyboxRootfs(), join(b, "rootfs"));
  return b;
}

const mounts: string[] = [];
function mountTmpfs(dir: string, options: string): void {
  mkdirSync(dir, { recursive: true });
  execFileSync("mount", ["-t", "tmpfs", "-o", options, "jobrt-fault", dir]);
  mounts.push(dir);
}

const started: ChildProcess[] = [];
const sites: FaultSite[] = [];
afterEach(async () => {
  for (const c of started.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  // After a failure half-way, gc takes what a killed jobrt left, so later cells start clean.
  for (const s of sites.splice(0)) await jobrt(["gc"], { env: s.env }).catch(() => undefined);
  for (const m of mounts.splice(0).reverse()) spawnSync("umount", [m]);
});

/** The step's `sleep 600` (or `sleep <seconds>`) processes (inside the containers: they carry the job env's marker). */
function sleepers(site: FaultSite, seconds = "600"): number {
  return markedProcesses(site).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8") === `sleep\u0000${seconds}\u0000`;
    } catch {
      return false;
    }
  }).length;
}

async function run(site: FaultSite, args: string[], env: Record<string, string> = {}) {
  sites.push(site);
  return jobrt(["run", ...args], { env: { ...site.env, ...env } });
}

describe("faults: runtime oci with real runc", () => {
  requires({ runc: haveRunc, root: isRoot, "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });
  beforeAll(() => {
    busyboxRootfs();
  });

  describe("a runtime command that is missing", () => {
    it("run mode: RunTimeRun's program does not exist: the shell's 127 and its line, nothing left", async () => {
      const conf = ociConf("run", { RunTimeRun: "/no/such/runc run x -b %b" });
      const s = ociSite(conf);
      const r = await run(s, ["--container", s.bundle, "true"]);
      expect(r.code).toBe(127);
      expect(r.stderr).toBe(
        `/bin/sh: 2: exec: /no/such/runc: not found\n${failureLine("task 0", "Exited with exit code 127")}`,
      );
      await expectNoLeaks(s);
    });

    it("create/start: RunTimeCreate's program does not exist: 125 and the supervisor's line naming the command", async () => {
      const conf = ociConf("create-start", { RunTimeCreate: "/no/such/runc create x -b %b" });
      const s = ociSite(conf);
      const r = await run(s, ["--container", s.bundle, "true"]);
      expect(r.code).toBe(125);
      expect(r.stderr).toBe(
        `/bin/sh: 1: /no/such/runc: not found\njobrt-oci: RunTimeCreate exited with status 127: /no/such/runc create x -b ${s.spool}/oci-job1-0/task-0\n${failureLine("task 0", "Exited with exit code 125")}`,
      );
      await expectNoLeaks(s);
    });
  });

  describe("a runtime command that exits 1", () => {
    it("run mode: RunTimeRun exits 1: the task's status is 1 and the runtime's own message is kept", async () => {
      const s = ociSite(ociConf("run", { RunTimeRun: "echo runtime says no >&2; exit 1" }));
      const r = await run(s, ["-n", "2", "--container", s.bundle, "true"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`runtime says no\nruntime says no\n${failureLine("tasks 0-1", "Exited with exit code 1")}`);
      await expectNoLeaks(s);
    });

    it("create/start: RunTimeStart exits 1 after the container was created: 125, the line, and the created container is deleted", async () => {
      const conf = ociConf("create-start", { RunTimeStart: "echo start refused >&2; exit 1" });
      const s = ociSite(conf);
      const r = await run(s, ["--container", s.bundle, "true"]);
      expect(r.code).toBe(125);
      expect(r.stderr).toBe(
        `start refused\njobrt-oci: RunTimeStart exited with status 1: echo start refused >&2; exit 1\n${failureLine("task 0", "Exited with exit code 125")}`,
      );
      expect(runcContainers(s.dir)).toEqual([]);
      await expectNoLeaks(s);
    });
  });

  describe("a runtime command that hangs", () => {
    it("create/start: RunTimeCreate hangs: the create time-out fires, names the key and command, 125", async () => {
      const s = ociSite(ociConf("create-start", { RunTimeCreate: "sleep 600" }));
      const start = Date.now();
      const r = await run(s, ["--container", s.bundle, "true"], { JOBRT_OCI_TIMEOUTS: "create=1" });
      expect(Date.now() - start).toBeLessThan(30_000);
      expect(r.code).toBe(125);
      expect(r.stderr).toBe(
        `jobrt-oci: RunTimeCreate did not finish within 1 s and was killed: sleep 600\n${failureLine("task 0", "Exited with exit code 125")}`,
      );
      await expectNoLeaks(s);
    });

    it("create/start: RunTimeStart hangs on a created container: time-out named, container deleted, 125", async () => {
      const s = ociSite(ociConf("create-start", { RunTimeStart: "sleep 600" }));
      const r = await run(s, ["--container", s.bundle, "true"], { JOBRT_OCI_TIMEOUTS: "start=1" });
      expect(r.code).toBe(125);
      expect(r.stderr).toBe(
        `jobrt-oci: RunTimeStart did not finish within 1 s and was killed: sleep 600\n${failureLine("task 0", "Exited with exit code 125")}`,
      );
      await expectNoLeaks(s);
    });

    it("run mode: RunTimeQuery hangs at cleanup: the query time-out fires with a warning, the task's status stands", async () => {
      const s = ociSite(ociConf("run", { RunTimeQuery: "sleep 600" }));
      const r = await run(s, ["--container", s.bundle, "sh", "-c", "exit 3"], { JOBRT_OCI_TIMEOUTS: "query=1" });
      expect(r.code).toBe(3);
      expect(r.stderr).toBe(
        `jobrt: warning: runtime oci: task 0: RunTimeQuery: RunTimeQuery did not finish within 1 s and was killed: sleep 600\n${failureLine("task 0", "Exited with exit code 3")}`,
      );
      await expectNoLeaks(s);
    });

    it("a bad $JOBRT_OCI_TIMEOUTS is refused in setup with one line naming the variable", async () => {
      const s = ociSite(ociConf("run"));
      const r = await run(s, ["--container", s.bundle, "true"], { JOBRT_OCI_TIMEOUTS: "query=soon" });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        'jobrt: runtime runtime/oci setup failed: $JOBRT_OCI_TIMEOUTS: "query=soon" is not KEY=SECONDS with KEY one of create, start, query, kill, delete and 0 < SECONDS <= 86400\n',
      );
      await expectNoLeaks(s);
    });
  });

  describe("RunTimeQuery prints garbage instead of state JSON", () => {
    it("create/start: the container never looks created: 125, and it is still deleted (a broken query is not a dead container)", async () => {
      const s = ociSite(ociConf("create-start", { RunTimeQuery: "echo this is not json" }));
      const r = await run(s, ["--container", s.bundle, "true"], { JOBRT_OCI_TIMEOUTS: "create=1" });
      expect(r.code).toBe(125);
      const warn =
        'RunTimeQuery exited 0 but printed no OCI state JSON ("this is not json"); running RunTimeKill and RunTimeDelete anyway';
      expect(r.stderr).toBe(
        `jobrt-oci: container did not reach "created" within 1 s of RunTimeCreate\njobrt-oci: ${warn}\njobrt: warning: runtime oci: task 0: ${warn}\n${failureLine("task 0", "Exited with exit code 125")}`,
      );
      await expectNoLeaks(s);
    });

    it("run mode: the task's status stands; cleanup warns and still runs Kill and Delete", async () => {
      const s = ociSite(ociConf("run", { RunTimeQuery: "echo this is not json" }));
      const r = await run(s, ["--container", s.bundle, "sh", "-c", "exit 4"]);
      expect(r.code).toBe(4);
      expect(r.stderr).toBe(
        `jobrt: warning: runtime oci: task 0: RunTimeQuery exited 0 but printed no OCI state JSON ("this is not json"); running RunTimeKill and RunTimeDelete anyway\n${failureLine("task 0", "Exited with exit code 4")}`,
      );
      await expectNoLeaks(s);
    });
  });

  describe("the bundle's config.json", () => {
    it("unreadable by the job user (--uid nobody, mode 0600): setup fails with one line, exit 1, no task starts", async () => {
      const s = ociSite(ociConf("run"));
      // Only the file's mode may stop the user: the directories on the way are open to all.
      chmodSync(s.dir, 0o755);
      chmodSync(join(s.dir, "bundle"), 0o755);
      chmodSync(join(s.dir, "bundle", "config.json"), 0o600);
      const file = join(s.bundle, "config.json");
      const r = await run(s, [
        "--uid",
        "nobody",
        "--gid",
        "nogroup",
        "--container",
        s.bundle,
        "touch",
        join(s.dir, "started"),
      ]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `jobrt: runtime runtime/oci setup failed: cannot read ${file}: EACCES: permission denied, open '${file}'\n`,
      );
      expect(existsSync(join(s.dir, "started"))).toBe(false);
      await expectNoLeaks(s);
    });

    it("unparsable: setup fails naming the file, exit 1", async () => {
      const s = ociSite(ociConf("run"));
      const b = bundleWith(s, '{"ociVersion": "1.0.2", "process": {');
      const r = await run(s, ["--container", b, "true"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        new RegExp(`^jobrt: runtime runtime/oci setup failed: ${join(b, "config.json")}: not valid JSON: [^\\n]+\\n$`),
      );
      await expectNoLeaks(s);
    });

    it("without root.path: setup fails saying what is missing, exit 1", async () => {
      const s = ociSite(ociConf("run"));
      const config = JSON.parse(readFileSync(join(s.bundle, "config.json"), "utf8")) as { root?: unknown };
      delete config.root;
      const b = bundleWith(s, JSON.stringify(config));
      const r = await run(s, ["--container", b, "true"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `jobrt: runtime runtime/oci setup failed: ${join(b, "config.json")}: root.path is missing (an OCI bundle's config.json names its rootfs there)\n`,
      );
      await expectNoLeaks(s);
    });
  });

  describe("spool directories on a full or read-only filesystem", () => {
    it("ContainerPath on a full 1 MiB tmpfs: the task's config.json cannot be written, exit 1, nothing left on it", async () => {
      const probe = faultSite();
      const cp = join(probe.dir, "full");
      mountTmpfs(cp, "size=1m");
      // Fill it up: a tmpfs allocates whole pages, so 1 MiB of data leaves no room at all.
      writeFileSync(join(cp, "fill"), Buffer.alloc(1 << 20));
      const conf = ociConf("run", {}, `ContainerPath=${cp}\n`);
      const s = { ...faultSite("", { "oci.conf": conf.text }) };
      const bundle = busyboxBundle(join(s.dir, "bundle"));
      const r = await run(s, ["-n", "2", "--container", bundle, "true"]);
      expect(r.code).toBe(1);
      // One line per task that could not be launched.
      const line = (t: number) =>
        `jobrt: runtime runtime/oci run failed: cannot write ${cp}/oci-job1-0/task-${t}/config.json: ENOSPC: no space left on device, write`;
      expect(r.stderr.split("\n").sort()).toEqual(["", line(0), line(1)]);
      expect(readdirSync(cp)).toEqual(["fill"]);
      await expectNoLeaks(s, cp);
    });

    it("ContainerPath on a read-only tmpfs: the step dir cannot be made, exit 1", async () => {
      const probe = faultSite();
      const cp = join(probe.dir, "ro");
      mountTmpfs(cp, "size=1m");
      execFileSync("mount", ["-o", "remount,ro", cp]);
      const conf = ociConf("run", {}, `ContainerPath=${cp}\n`);
      const s = faultSite("", { "oci.conf": conf.text });
      const bundle = busyboxBundle(join(s.dir, "bundle"));
      const r = await run(s, ["--container", bundle, "touch", join(s.dir, "started")]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `jobrt: runtime runtime/oci setup failed: cannot create the step spool dir ${cp}/oci-job1-0: EROFS: read-only file system, mkdir '${cp}/oci-job1-0'\n`,
      );
      expect(existsSync(join(s.dir, "started"))).toBe(false);
      await expectNoLeaks(s, cp);
    });

    it("SpoolDir on a full 1 MiB tmpfs: no job id can be claimed, exit 1, nothing left in SpoolDir", async () => {
      const s = ociSite(ociConf("run"));
      mountTmpfs(s.spool, "size=1m");
      writeFileSync(join(s.spool, "fill"), Buffer.alloc(1 << 20));
      const r = await run(s, ["--container", s.bundle, "true"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `jobrt: cannot claim a job id in ${s.spool}/jobs: ENOSPC: no space left on device, write (check SpoolDir in jobrt.conf)\n`,
      );
      expect(readdirSync(s.spool).sort()).toEqual(["fill", "jobs"]);
      expect(readdirSync(join(s.spool, "jobs")).filter((n) => n !== "next-jobid")).toEqual([]);
      unlinkSync(join(s.spool, "fill"));
      await expectNoLeaks(s);
    });

    it("SpoolDir on a read-only tmpfs: one line naming the read-only filesystem, exit 1, nothing started", async () => {
      const s = ociSite(ociConf("run"));
      mountTmpfs(s.spool, "size=1m");
      execFileSync("mount", ["-o", "remount,ro", s.spool]);
      const r = await run(s, ["--container", s.bundle, "touch", join(s.dir, "started")]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `jobrt: SpoolDir: cannot create ${s.spool}/jobs: EROFS: read-only file system, mkdir '${s.spool}/jobs' (check SpoolDir in jobrt.conf)\n`,
      );
      expect(existsSync(join(s.dir, "started"))).toBe(false);
      expect(readdirSync(s.spool)).toEqual([]);
      await expectNoLeaks(s);
    });
  });

  describe("SIGTERM to jobrt while containers run", () => {
    for (const mode of ["run", "create-start"] as const) {
      it(`${mode}: every container gets the signal, the tasks' own status (7) is reported, nothing left`, async () => {
        const s = ociSite(ociConf(mode));
        sites.push(s);
        const child = spawn(
          process.execPath,
          [
            "--",
            jobrtBin,
            "run",
            "-n",
            "3",
            "--container",
            s.bundle,
            "sh",
            "-c",
            "trap 'exit 7' TERM; sleep 600 & wait",
          ],
          {
            env: { ...process.env, ...s.env },
            stdio: ["ignore", "pipe", "pipe"],
          },
        );
        started.push(child);
        let stderr = "";
        child.stderr?.setEncoding("utf8").on("data", (d: string) => {
          stderr += d;
        });
        child.stdout?.resume();
        await waitFor(
          () => runcContainers(s.dir).length === 3 && sleepers(s) === 3,
          "3 containers with their sleep to run",
          20_000,
        );
        child.kill("SIGTERM");
        const code = await new Promise<number | null>((r) => child.once("close", (c) => r(c)));
        expect(stderr).toBe(failureLine("tasks 0-2", "Exited with exit code 7"));
        expect(code).toBe(7);
        await expectNoLeaks(s);
      });
    }
  });

  describe("the bundle is never written to (the step spool dir is mounted only where nothing must be created)", () => {
    /** Every entry under `dir`: path, type, mode, owner, size, and a file's sha256 or a link's target. */
    function tree(dir: string): string[] {
      const out: string[] = [];
      const walk = (rel: string) => {
        const p = join(dir, rel);
        const st = lstatSync(p);
        let what = "";
        if (st.isSymbolicLink()) what = `-> ${readlinkSync(p)}`;
        else if (st.isFile()) what = createHash("sha256").update(readFileSync(p)).digest("hex");
        out.push(`${rel} ${st.mode.toString(8)} ${st.uid}:${st.gid} ${st.isDirectory() ? "" : st.size} ${what}`);
        if (st.isDirectory()) for (const n of readdirSync(p).sort()) walk(join(rel, n));
      };
      walk(".");
      return out;
    }

    /** A bundle with its own rootfs copy (root.readonly as `runc spec` writes it: true). */
    function ownBundle(site: FaultSite): string {
      const b = busyboxBundle(join(site.dir, "own-bundle"));
      expect(
        (JSON.parse(readFileSync(join(b, "config.json"), "utf8")) as { root: { readonly?: boolean } }).root.readonly,
      ).toBe(true);
      return b;
    }

    for (const mode of ["run", "create-start"] as const) {
      it(`${mode}: root.readonly: true, -n 2: the tasks run and the bundle tree is byte-identical afterwards`, async () => {
        const s = ociSite(ociConf(mode));
        const b = ownBundle(s);
        const before = tree(b);
        const r = await run(s, ["-n", "2", "--container", b, "cat", "/etc/jobrt-image"]);
        expect(r.stderr).toBe("");
        expect(r.stdout).toBe("jobrt-busybox-image\njobrt-busybox-image\n");
        expect(r.code).toBe(0);
        expect(tree(b)).toEqual(before);
        await expectNoLeaks(s);
      });

      it(`${mode}: a rootfs on a read-only bind mount runs (nothing is created in it)`, async () => {
        const s = ociSite(ociConf(mode));
        const b = ownBundle(s);
        const rootfs = join(b, "rootfs");
        execFileSync("mount", ["--bind", rootfs, rootfs]);
        mounts.push(rootfs);
        execFileSync("mount", ["-o", "remount,bind,ro", rootfs]);
        const before = tree(b);
        const r = await run(s, ["--container", b, "cat", "/etc/jobrt-image"]);
        expect(r.stderr).toBe("");
        expect(r.stdout).toBe("jobrt-busybox-image\n");
        expect(r.code).toBe(0);
        expect(tree(b)).toEqual(before);
        await expectNoLeaks(s);
      });
    }

    it("MountSpoolDir naming a directory of the image: the step spool dir is mounted there, on a read-only rootfs too", async () => {
      const s = ociSite(ociConf("run", {}, "MountSpoolDir=/home\n"));
      const b = ownBundle(s);
      const rootfs = join(b, "rootfs");
      execFileSync("mount", ["--bind", rootfs, rootfs]);
      mounts.push(rootfs);
      execFileSync("mount", ["-o", "remount,bind,ro", rootfs]);
      const before = tree(b);
      const r = await run(s, ["--container", b, "ls", "/home/task-0"]);
      expect(r.stderr).toBe("");
      expect(r.stdout).toBe("config.json\n");
      expect(r.code).toBe(0);
      expect(tree(b)).toEqual(before);
      await expectNoLeaks(s);
    });

    it("MountSpoolDir naming a path the image lacks: one warning, no mount, the image untouched", async () => {
      const s = ociSite(ociConf("create-start", {}, "MountSpoolDir=/var/spool/jobrt\n"));
      const b = ownBundle(s);
      const before = tree(b);
      const r = await run(s, ["-n", "2", "--container", b, "true"]);
      expect(r.stderr).toBe(
        `jobrt: warning: runtime oci: MountSpoolDir: the step spool dir is not mounted: /var/spool/jobrt does not exist in the image (${b}/rootfs), and the runtime would create it there\n`,
      );
      expect(r.code).toBe(0);
      expect(tree(b)).toEqual(before);
      await expectNoLeaks(s);
    });
  });

  describe("ContainerPath through a symlink", () => {
    it("the user's own component of ContainerPath=<dir>/%u is a symlink: refused with one line naming it, nothing created through it", async () => {
      const probe = faultSite();
      chmodSync(probe.dir, 0o755);
      const shared = join(probe.dir, "shared");
      const elsewhere = join(probe.dir, "elsewhere");
      mkdirSync(shared, { mode: 0o755 });
      mkdirSync(elsewhere, { mode: 0o755 });
      symlinkSync(elsewhere, join(shared, "nobody"));
      lchownSync(join(shared, "nobody"), 65534, 65534);
      const s = ociSite(ociConf("run", {}, `ContainerPath=${shared}/%u\n`));
      chmodSync(s.dir, 0o755);
      const r = await run(s, [
        "--uid",
        "nobody",
        "--gid",
        "nogroup",
        "-D",
        "/",
        "--container",
        s.bundle,
        "touch",
        join(probe.dir, "started"),
      ]);
      expect(r.stderr).toBe(
        `jobrt: runtime runtime/oci setup failed: cannot create the step spool dir ${shared}/nobody/oci-job1-0: ${shared}/nobody is a symbolic link owned by uid 65534; refusing to follow it\n`,
      );
      expect(r.code).toBe(1);
      expect(readdirSync(elsewhere)).toEqual([]);
      expect(existsSync(join(probe.dir, "started"))).toBe(false);
      await expectNoLeaks(s);
    });

    it("a symlink owned by root on the way (like /var/run -> /run) is followed", async () => {
      const probe = faultSite();
      const real = join(probe.dir, "real");
      mkdirSync(real);
      symlinkSync(real, join(probe.dir, "link"));
      const s = ociSite(ociConf("run", {}, `ContainerPath=${probe.dir}/link/spool\n`));
      const r = await run(s, ["--container", s.bundle, "true"]);
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      expect(readdirSync(join(real, "spool"))).toEqual([]);
      await expectNoLeaks(s);
    });
  });

  describe("signals while containers are created but not started (create/start)", () => {
    /** Starts `jobrt run ARGS` for a site; resolves with its status and how long after `since()` it ended. */
    function start(
      site: FaultSite,
      args: string[],
    ): { child: ChildProcess; ended: Promise<{ code: number | null; stderr: string }> } {
      sites.push(site);
      const child = spawn(process.execPath, ["--", jobrtBin, "run", ...args], {
        env: { ...process.env, ...site.env },
        stdio: ["ignore", "ignore", "pipe"],
      });
      started.push(child);
      let stderr = "";
      child.stderr?.setEncoding("utf8").on("data", (d: string) => {
        stderr += d;
      });
      return { child, ended: new Promise((r) => child.once("close", (code) => r({ code, stderr }))) };
    }

    /** Resolves with the elapsed ms, or with Infinity when `ended` did not settle within `ms`. */
    async function within<T>(ended: Promise<T>, ms: number): Promise<number> {
      const t0 = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<number>((r) => {
        timer = setTimeout(() => r(Number.POSITIVE_INFINITY), ms);
      });
      const elapsed = await Promise.race([ended.then(() => Date.now() - t0), late]);
      clearTimeout(timer);
      return elapsed;
    }

    it("SIGINT then SIGTERM while RunTimeStart still sleeps (-n 2): jobrt ends at once, nothing left", async () => {
      const conf = ociConf("create-start");
      const s = ociSite({
        text: conf.text.replace(`RunTimeStart="${RUNC} start`, `RunTimeStart="sleep 3; ${RUNC} start`),
      });
      expect(readFileSync(join(s.dir, "oci.conf"), "utf8")).toContain('RunTimeStart="sleep 3; runc');
      const { child, ended } = start(s, ["-n", "2", "--container", s.bundle, "sleep", "600"]);
      await waitFor(() => runcContainers(s.dir).length === 2, "both containers to be created", 20_000);
      child.kill("SIGINT");
      child.kill("SIGTERM");
      // KillWait is 1 s; the watchdog then deletes both containers.
      expect(await within(ended, 15_000)).toBeLessThan(15_000);
      await expectNoLeaks(s);
    });

    it("a signal storm at random moments (20 runs, -n 2): every run ends within KillWait + 10 s, nothing left", async () => {
      for (let i = 0; i < 20; i++) {
        const s = ociSite(ociConf("create-start"));
        const { child, ended } = start(s, ["-n", "2", "--container", s.bundle, "sleep", "600"]);
        await new Promise((r) => setTimeout(r, Math.random() * 1500));
        const burst = 1 + Math.floor(Math.random() * 5);
        for (let k = 0; k < burst; k++) {
          if (child.exitCode !== null || child.signalCode !== null) break;
          child.kill(Math.random() < 0.5 ? "SIGINT" : "SIGTERM");
          await new Promise((r) => setTimeout(r, Math.random() * 50));
        }
        expect(await within(ended, 11_000), `run ${i}`).toBeLessThan(11_000);
        await expectNoLeaks(s);
      }
    }, 600_000);
  });

  describe("jobrt SIGKILLed, then gc while RunTimeCreate is still running", () => {
    /** runc's state dir and cgroup dirs named after a container id. */
    function runcLeftovers(id: string): string[] {
      const found: string[] = [];
      if (existsSync(join("/run/runc", id))) found.push(join("/run/runc", id));
      for (const c of readdirSync("/sys/fs/cgroup")) {
        for (const p of [join("/sys/fs/cgroup", c, id), join("/sys/fs/cgroup", id)])
          if (existsSync(p) && !found.includes(p)) found.push(p);
      }
      return found;
    }

    it("gc waits for the create to finish and deletes the container: no state dir, no cgroup dir, no container (3 trials)", async () => {
      for (let trial = 0; trial < 3; trial++) {
        const s = ociSite(ociConf("create-start"));
        // With process groups, gc's kill cannot reach the watchdog (its own group), which lets the
        // create finish and deletes the container. A step cgroup (ProcTrack=cgroup) takes the
        // watchdog and runc create with it: cleanup then removes runc's state dir and its
        // per-container cgroup dirs itself (tests/faults/cutshort.test.ts).
        writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${s.spool}\nKillWait=1\nProcTrack=pgid\n`);
        const conf = readFileSync(join(s.dir, "oci.conf"), "utf8");
        const tag = /create (\S+)\.%j/.exec(conf)?.[1] as string;
        // A createRuntime hook makes `runc create` take 2 s, and says when it is under way.
        const marker = join(s.dir, "creating");
        const b = join(s.dir, "slow-bundle");
        busyboxBundle(b);
        const config = JSON.parse(readFileSync(join(b, "config.json"), "utf8")) as Record<string, unknown>;
        config.hooks = { createRuntime: [{ path: "/bin/sh", args: ["sh", "-c", `touch ${marker}; sleep 2`] }] };
        writeFileSync(join(b, "config.json"), JSON.stringify(config));
        sites.push(s);
        const child = spawn(process.execPath, ["--", jobrtBin, "run", "--container", b, "sleep", "600"], {
          env: { ...process.env, ...s.env },
          stdio: "ignore",
        });
        started.push(child);
        await waitFor(() => existsSync(marker), "runc create to run its hook", 20_000);
        child.kill("SIGKILL");
        await new Promise((r) => child.once("close", r));
        const gc = await jobrt(["gc"], { env: s.env });
        expect(gc.stderr, `trial ${trial}`).toBe("");
        expect(gc.code).toBe(0);
        const id = `${tag}.1.0.0`;
        expect(runcContainers(s.dir), `trial ${trial}`).toEqual([]);
        expect(runcLeftovers(id), `trial ${trial}`).toEqual([]);
        await expectNoLeaks(s);
      }
    }, 180_000);
  });

  describe("run mode: the whole stop fits in KillWait plus a small margin", () => {
    it("SIGTERM to jobrt running `sleep 30` (which ignores it as the container's pid 1): ends within KillWait (4 s) + 3 s, nothing left", async () => {
      const s = ociSite(ociConf("run"));
      writeFileSync(join(s.dir, "jobrt.conf"), `SpoolDir=${s.spool}\nKillWait=4\n`);
      sites.push(s);
      const child = spawn(process.execPath, ["--", jobrtBin, "run", "--container", s.bundle, "sleep", "30"], {
        env: { ...process.env, ...s.env },
        stdio: ["ignore", "ignore", "pipe"],
      });
      started.push(child);
      let stderr = "";
      child.stderr?.setEncoding("utf8").on("data", (d: string) => {
        stderr += d;
      });
      await waitFor(
        () => runcContainers(s.dir).length === 1 && sleepers(s, "30") === 1,
        "the container's sleep",
        20_000,
      );
      const t0 = Date.now();
      child.kill("SIGTERM");
      const code = await new Promise<number | null>((r) => child.once("close", (c) => r(c)));
      const elapsed = Date.now() - t0;
      // pid 1 ignores SIGTERM (no handler), so KillWait's SIGKILL ends it.
      expect(stderr).toBe(failureLine("task 0", "Killed"));
      expect(code).toBe(137);
      expect(elapsed).toBeGreaterThanOrEqual(4000);
      expect(elapsed).toBeLessThan(7000);
      await expectNoLeaks(s);
    }, 60_000);
  });
});
