/**
 * Process tracking (docs/reliability.md, "Process tracking"): with a cgroup, nothing a task starts
 * outlives the step: not a daemon that left with setsid, not a double fork; at step end, on SIGTERM,
 * on -t, and through `jobrt gc` after jobrt itself was SIGKILLed. Both cgroup versions, for real.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { jobrt, jobrtBin, tempDir } from "../helpers/jobrt.js";
import { type FaultSite, expectNoLeaks, faultSite, markedProcesses, waitFor } from "../helpers/leaks.js";
import { faultPluginDir } from "./faultplugin.js";

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

/** True while the pid exists at all, zombie included: "gone" means reaped too. */
const exists = (pid: number) => existsSync(`/proc/${pid}`);

/** A task that leaves two daemons: one via setsid, one via a double fork; their pids go to `dir`. */
function daemonTask(dir: string, then: string): string[] {
  const file = (name: string) => `${dir}/${name}.$SLURM_PROCID`;
  // Written under a temporary name and renamed: a file that exists holds the whole pid.
  const record = (name: string) => `echo $! > ${file(name)}.tmp && mv ${file(name)}.tmp ${file(name)}`;
  const recorded = `while [ ! -e ${file("setsid")} ] || [ ! -e ${file("double")} ]; do sleep 0.01; done`;
  return [
    "sh",
    "-c",
    `setsid sh -c 'sleep 777 & ${record("setsid")}; wait' & (sleep 778 & ${record("double")}) ; ${recorded}; ${then}`,
  ];
}

function daemonPids(dir: string, expected: number): Promise<number[]> {
  const done = () => readdirSync(dir).filter((f) => !f.endsWith(".tmp"));
  return waitFor(() => done().length === expected, "the daemons to start").then(() =>
    done().map((f) => Number(readFileSync(join(dir, f), "utf8"))),
  );
}

function startJobrt(
  site: FaultSite,
  args: string[],
): { child: ChildProcess; done: Promise<{ code: number | null; stdout: string; stderr: string }> } {
  const child = spawn(process.execPath, ["--", jobrtBin, "run", ...args], {
    env: { ...process.env, ...site.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr?.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  // 'exit', not 'close': after a SIGKILL of jobrt, the daemons still hold its stdout until gc.
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("exit", (code) => resolve({ code, stdout, stderr })),
  );
  return { child, done };
}

for (const mode of ["cgroup2", "cgroup1"] as const) {
  describe(`ProcTrack=${mode}`, () => {
    const site = () => faultSite(`ProcTrack=${mode}\n`);

    it("daemons a task left (setsid, double fork) die at step end; jobrt does not wait for their pipes", async () => {
      const s = site();
      const dir = tempDir();
      // Several tasks: output is copied line by line, so the daemons hold the tasks' pipes open.
      const r = await jobrt(["run", "--json", "-n", "2", "--runtime", "none", ...daemonTask(dir, "echo done")], {
        env: s.env,
        timeoutMs: 20_000,
      });
      expect(r.code).toBe(0);
      const events = r.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { event: string; data?: string; cgroup?: string });
      expect(events.filter((e) => e.event === "output").map((e) => e.data)).toEqual(["done", "done"]);
      const cgroup = events[0]!.cgroup!;
      expect(cgroup).toMatch(
        mode === "cgroup2" ? /^\/sys\/fs\/cgroup\/unified\/jobrt-/ : /^\/sys\/fs\/cgroup\/freezer\/jobrt-/,
      );
      const pids = await daemonPids(dir, 4);
      await waitFor(
        () => !pids.some(exists),
        `the daemons to be gone and reaped (left: ${pids.filter(exists).join(",")})`,
        10_000,
      );
      expect(existsSync(cgroup)).toBe(false);
      await expectNoLeaks(s);
    });

    it("SIGTERM to jobrt kills the daemons too, and reports the task's status", async () => {
      const s = site();
      const dir = tempDir();
      const { child, done } = startJobrt(s, ["--runtime", "none", ...daemonTask(dir, "exec sleep 600")]);
      const pids = await daemonPids(dir, 2);
      child.kill("SIGTERM");
      const r = await done;
      expect(r.code).toBe(143);
      await waitFor(() => !pids.some(exists), "the daemons to be gone", 10_000);
      await expectNoLeaks(s);
    });

    it("-t expiry kills the daemons too", async () => {
      const s = site();
      const dir = tempDir();
      const r = await jobrt(["run", "-t", "0:1", "--runtime", "none", ...daemonTask(dir, "exec sleep 600")], {
        env: s.env,
        timeoutMs: 20_000,
      });
      expect(r.stderr).toContain("time limit of 1 s reached");
      expect(r.code).toBe(143);
      const pids = await daemonPids(dir, 2);
      await waitFor(() => !pids.some(exists), "the daemons to be gone", 10_000);
      await expectNoLeaks(s);
    });

    it("jobrt gc after jobrt was SIGKILLed kills the daemons and removes the step's cgroup", async () => {
      const s = site();
      const dir = tempDir();
      const { child, done } = startJobrt(s, ["--json", "--runtime", "none", ...daemonTask(dir, "exec sleep 600")]);
      const pids = await daemonPids(dir, 2);
      child.kill("SIGKILL");
      const { stdout } = await done;
      const cgroup = (JSON.parse(stdout.split("\n")[0]!) as { cgroup: string }).cgroup;
      expect(existsSync(cgroup)).toBe(true);
      expect(pids.every(exists)).toBe(true);
      const gc = await jobrt(["gc"], { env: s.env });
      expect(gc.code).toBe(0);
      expect(gc.stdout).toMatch(/^gc: step \d+\.0: killed \d+ task process group\(s\); cleaned up none\n$/);
      await waitFor(
        () => !pids.some(exists) && markedProcesses(s).length === 0,
        "the daemons and the task to be gone",
        10_000,
      );
      expect(existsSync(cgroup)).toBe(false);
      await expectNoLeaks(s);
    });

    it("jobrt gc after jobrt was SIGKILLed while its runtime loads removes the step's cgroup", async () => {
      // The cgroup is made before the runtimes load; it must be journaled before it exists, or a
      // jobrt killed during a slow plugin init leaves it for good (issue 23, item 7).
      const plugins = faultPluginDir();
      const s = faultSite(`ProcTrack=${mode}\nPluginDir=${plugins}\nRuntimePlugins=none,fault\nPluginInitTimeout=30\n`);
      const log = join(s.dir, "calls.log");
      Object.assign(s.env, { JOBRT_FAULT: "init-hang", JOBRT_FAULT_LOG: log });
      const { child, done } = startJobrt(s, ["--json", "--runtime", "fault", "true"]);
      await waitFor(() => existsSync(log) && readFileSync(log, "utf8").includes("init"), "the runtime's init to start");
      child.kill("SIGKILL");
      const { stdout } = await done;
      const cgroup = (JSON.parse(stdout.split("\n")[0]!) as { cgroup: string }).cgroup;
      expect(existsSync(cgroup)).toBe(true);
      const gc = await jobrt(["gc"], { env: s.env });
      expect(gc.code).toBe(0);
      expect(gc.stdout).toMatch(/^gc: step \d+\.0: killed 0 task process group\(s\); cleaned up no runtime\n$/);
      expect(existsSync(cgroup)).toBe(false);
      await expectNoLeaks(s);
    });
  });
}

/** A site that user nobody can use: conf dir open to all, SpoolDir and TMPDIR its own. */
function nobodySite(conf: string): FaultSite {
  const s = faultSite(conf);
  chmodSync(s.dir, 0o755);
  mkdirSync(s.spool);
  chownSync(s.spool, 65534, 65534);
  chownSync(s.tmp, 65534, 65534);
  return s;
}

describe("ProcTrack=pgid and the fallback", () => {
  it("pgid is what the step-start event and `jobrt runtimes` say", async () => {
    const s = faultSite("ProcTrack=pgid\n");
    const r = await jobrt(["run", "--json", "--runtime", "none", "true"], { env: s.env });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout.split("\n")[0]!)).toMatchObject({ event: "step-start", proctrack: "pgid" });
    const list = await jobrt(["runtimes"], { env: s.env });
    expect(list.stdout).toContain("process tracking (ProcTrack=pgid): process groups only\n");
  });

  it("auto takes a cgroup as root, and says so", async () => {
    const s = faultSite("");
    const r = await jobrt(["run", "--json", "--runtime", "none", "true"], { env: s.env });
    expect(JSON.parse(r.stdout.split("\n")[0]!)).toMatchObject({ event: "step-start", proctrack: "cgroup2" });
  });

  it("an explicit cgroup mode that cannot be had fails with one line before anything starts", async () => {
    const s = nobodySite("ProcTrack=cgroup2\n");
    const r = await jobrt(["run", "--runtime", "none", "sh", "-c", `touch ${s.tmp}/started`], {
      env: s.env,
      uid: 65534,
      gid: 65534,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^jobrt: ProcTrack=cgroup2: cgroup2: cannot create \/sys\/fs\/cgroup\/unified\/jobrt-\S+: EACCES \(set ProcTrack=auto or pgid in jobrt.conf\)\n$/,
    );
    expect(existsSync(join(s.tmp, "started"))).toBe(false);
  });

  it("a non-root user without a delegated cgroup falls back to process groups, and -v and --json say why", async () => {
    const s = nobodySite("");
    const r = await jobrt(["run", "-v", "--json", "--runtime", "none", "true"], { env: s.env, uid: 65534, gid: 65534 });
    expect(r.code).toBe(0);
    const start = JSON.parse(r.stdout.split("\n")[0]!) as { proctrack: string; proctrackFallback: string };
    expect(start.proctrack).toBe("pgid");
    expect(start.proctrackFallback).toMatch(/cgroup2: cannot create .*EACCES/);
    expect(r.stderr).toContain("process tracking by process group: cgroup2: cannot create");
  });

  it("a task exit with a setsid daemon holding its pipe does not hang jobrt (output stops being read after KillWait)", async () => {
    const s = faultSite("ProcTrack=pgid\n");
    const dir = tempDir();
    const r = await jobrt(["run", "-n", "2", "--runtime", "none", ...daemonTask(dir, "echo done")], {
      env: s.env,
      timeoutMs: 20_000,
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("done\ndone\n");
    expect(r.stderr).toContain("escaped its process group still holds its output");
    // What process groups cannot do: the setsid daemons survive (the double fork stayed in the group).
    const survivors = readdirSync(dir)
      .filter((f) => f.startsWith("setsid."))
      .map((f) => Number(readFileSync(join(dir, f), "utf8")));
    expect(survivors.every(exists)).toBe(true);
    for (const pid of survivors) process.kill(pid, "SIGKILL");
  });
});
