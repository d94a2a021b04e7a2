import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { failureLine, jobrt, jobrtBin } from "../helpers/jobrt.js";
import { type FaultSite, expectNoLeaks, faultSite, waitFor } from "../helpers/leaks.js";
import { faultPluginDir } from "./faultplugin.js";

// The host's fault matrix: each cell runs the built jobrt, checks the exit status and the one line
// the docs promise, and ends with the same leak check (no process, container, spool dir or temp file).

let plugins: string;
beforeAll(() => {
  plugins = faultPluginDir();
});

function site(extra = ""): FaultSite & { log: string } {
  const timeout = extra.includes("PluginInitTimeout=") ? "" : "PluginInitTimeout=1\n";
  const s = faultSite(`PluginDir=${plugins}\nRuntimePlugins=none,fault\n${timeout}${extra}`);
  const log = join(s.dir, "calls.log");
  s.env.JOBRT_FAULT_LOG = log;
  return { ...s, log };
}

const calls = (s: { log: string }) => (existsSync(s.log) ? readFileSync(s.log, "utf8").trim().split("\n") : []);

describe("faults: tasks", () => {
  it.each([
    ["task exits non-zero", ["sh", "-c", "exit 7"], 7, failureLine("task 0", "Exited with exit code 7")],
    ["task killed by a signal", ["sh", "-c", "kill -KILL $$"], 137, failureLine("task 0", "Killed")],
    [
      "program not found",
      ["/no/such/program"],
      127,
      `jobrt: task 0: cannot execute /no/such/program: command not found\n${failureLine("task 0", "Exited with exit code 127")}`,
    ],
    [
      "program not executable",
      ["{dir}/data.txt"],
      126,
      `jobrt: task 0: cannot execute {dir}/data.txt: permission denied\n${failureLine("task 0", "Exited with exit code 126")}`,
    ],
  ])("%s", async (_, template, status, stderrTemplate) => {
    const s = site();
    writeFileSync(join(s.dir, "data.txt"), "not a program\n", { mode: 0o644 });
    const argv = template.map((a) => a.replace("{dir}", s.dir));
    const stderr = stderrTemplate.replace("{dir}", s.dir);
    const r = await jobrt(["run", "--runtime", "fault", ...argv], { env: s.env });
    expect(r.code).toBe(status);
    expect(r.stderr).toBe(stderr);
    expect(calls(s)).toEqual(["init", "setup", "cleanup", "fini"]);
    await expectNoLeaks(s);
  });
});

describe("faults: plugins", () => {
  it("setup throws: exit 1, the runtime's error, no task, cleanup and fini still run", async () => {
    const s = site();
    const r = await jobrt(["run", "--runtime", "fault", "-n", "2", "touch", join(s.dir, "started")], {
      env: { ...s.env, JOBRT_FAULT: "setup-throw" },
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("jobrt: runtime runtime/fault setup failed: injected setup failure\n");
    expect(existsSync(join(s.dir, "started"))).toBe(false);
    expect(calls(s)).toEqual(["init", "setup", "cleanup", "fini"]);
    await expectNoLeaks(s);
  });

  it("cleanup throws: the tasks' status is kept but the step reports it and exits at least 1", async () => {
    const s = site();
    const r = await jobrt(["run", "--runtime", "fault", "true"], { env: { ...s.env, JOBRT_FAULT: "cleanup-throw" } });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("jobrt: runtime runtime/fault cleanup failed: injected cleanup failure\n");
    expect(calls(s)).toEqual(["init", "setup", "cleanup", "fini"]);
    await expectNoLeaks(s);
  });

  it("init hangs: the load fails after PluginInitTimeout with a clear line, nothing starts", async () => {
    const s = site();
    const r = await jobrt(["run", "--runtime", "fault", "touch", join(s.dir, "started")], {
      env: { ...s.env, JOBRT_FAULT: "init-hang" },
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("jobrt: runtime runtime/fault init did not finish within 1000 ms\n");
    expect(existsSync(join(s.dir, "started"))).toBe(false);
    await expectNoLeaks(s);
  });

  it("fini throws: reported, exit 1", async () => {
    const s = site();
    const r = await jobrt(["run", "--runtime", "fault", "true"], { env: { ...s.env, JOBRT_FAULT: "fini-throw" } });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("jobrt: fini failed for 1 runtime(s): runtime/fault: injected fini failure\n");
    await expectNoLeaks(s);
  });
});

/** Starts jobrt, waits until `ready` says the phase is reached, sends `signal`, returns the result. */
async function signalDuring(
  s: ReturnType<typeof site>,
  args: string[],
  fault: string,
  ready: () => boolean,
  signal: NodeJS.Signals,
) {
  const child = spawn(process.execPath, ["--", jobrtBin, ...args], {
    env: { ...process.env, ...s.env, JOBRT_FAULT: fault },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  child.stdout.resume();
  await waitFor(ready, "the phase to be reached");
  child.kill(signal);
  const code = await new Promise<number | null>((r) => child.once("close", r));
  return { code, stderr };
}

describe("faults: signals to jobrt in every phase", () => {
  for (const [signal, status] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
  ] as const) {
    it(`${signal} during init (before setup): nothing starts, exit ${status}`, async () => {
      const s = site("PluginInitTimeout=30\n");
      const r = await signalDuring(
        s,
        ["run", "--runtime", "fault", "touch", join(s.dir, "started")],
        "init-hang",
        () => calls(s).includes("init"),
        signal,
      );
      // init never finishes; the signal abandons the load at once instead of waiting 30 s for it.
      expect(existsSync(join(s.dir, "started"))).toBe(false);
      expect(r.code).toBe(status);
      expect(r.stderr).toBe("");
      await expectNoLeaks(s);
    });

    it(`${signal} during setup: no task starts, cleanup runs, exit ${status}`, async () => {
      const s = site();
      const r = await signalDuring(
        s,
        ["run", "--runtime", "fault", "touch", join(s.dir, "started")],
        "setup-slow",
        () => calls(s).includes("setup-waiting"),
        signal,
      );
      expect(r.code).toBe(status);
      expect(existsSync(join(s.dir, "started"))).toBe(false);
      expect(calls(s)).toEqual(["init", "setup", "setup-waiting", "cleanup", "fini"]);
      await expectNoLeaks(s);
    });

    it(`${signal} while tasks run: every task stops, cleanup runs, exit ${status}`, async () => {
      const s = site();
      const r = await signalDuring(
        s,
        ["run", "--runtime", "fault", "-n", "3", "sh", "-c", `touch ${s.dir}/t$SLURM_PROCID; exec sleep 60`],
        "",
        () => [0, 1, 2].every((t) => existsSync(join(s.dir, `t${t}`))),
        signal,
      );
      expect(r.code).toBe(status);
      expect(calls(s)).toEqual(["init", "setup", "cleanup", "fini"]);
      await expectNoLeaks(s);
    });

    it(`${signal} during cleanup: cleanup finishes, the tasks' status stands`, async () => {
      const s = site();
      const r = await signalDuring(
        s,
        ["run", "--runtime", "fault", "sh", "-c", "exit 4"],
        "cleanup-slow",
        () => calls(s).includes("cleanup-waiting"),
        signal,
      );
      expect(r.code).toBe(4);
      expect(calls(s)).toEqual(["init", "setup", "cleanup", "cleanup-waiting", "cleanup-done", "fini"]);
      await expectNoLeaks(s);
    });
  }

  it("a second Ctrl-C kills the tasks at once but does not skip cleanup", async () => {
    const s = site();
    writeFileSync(
      join(s.dir, "jobrt.conf"),
      readFileSync(join(s.dir, "jobrt.conf"), "utf8").replace("KillWait=1", "KillWait=30"),
    );
    const child = spawn(
      process.execPath,
      [
        "--",
        jobrtBin,
        "run",
        "--runtime",
        "fault",
        "sh",
        "-c",
        `trap '' INT TERM; touch ${s.dir}/up; while :; do sleep 1; done`,
      ],
      {
        env: { ...process.env, ...s.env },
        stdio: "ignore",
      },
    );
    await waitFor(() => existsSync(join(s.dir, "up")), "the task to start");
    const start = Date.now();
    child.kill("SIGINT");
    await new Promise((r) => setTimeout(r, 300));
    child.kill("SIGINT");
    const code = await new Promise<number | null>((r) => child.once("close", r));
    expect(Date.now() - start).toBeLessThan(20_000);
    expect(code).toBe(137);
    expect(calls(s)).toEqual(["init", "setup", "cleanup", "fini"]);
    await expectNoLeaks(s);
  });

  it("-t: the time limit stops the step like Ctrl-C and says so", async () => {
    const s = site();
    const r = await jobrt(["run", "--runtime", "fault", "-t", "0:1", "sleep", "60"], { env: s.env });
    expect(r.code).toBe(143);
    expect(r.stderr).toMatch(/^jobrt: step \d+\.0 cancelled: time limit of 1 s reached\n/);
    expect(r.stderr.split("\n").slice(1).join("\n")).toBe(failureLine("task 0", "Terminated"));
    expect(calls(s)).toEqual(["init", "setup", "cleanup", "fini"]);
    await expectNoLeaks(s);
  });
});

describe("faults: SpoolDir", () => {
  it("a SpoolDir that cannot be created fails the step with one line, exit 1", async () => {
    // (Not under /proc: Node 20's recursive mkdir spins for ever there.)
    const s = faultSite();
    writeFileSync(join(s.dir, "jobrt.conf"), "SpoolDir=/dev/null/spool\n");
    const r = await jobrt(["run", "--runtime", "none", "true"], { env: s.env });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^jobrt: SpoolDir: cannot create \/dev\/null\/spool: ENOTDIR.*\(check SpoolDir in jobrt.conf\)\n$/,
    );
  });
});
