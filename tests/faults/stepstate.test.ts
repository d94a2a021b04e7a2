/**
 * Plugin contract API 2 through the built jobrt: the step state setup returns reaches taskInit,
 * run and cleanup in another `jobrt exec` process of the same step and in `jobrt gc` after the
 * host was SIGKILLed; an ExecSpec with signals "leader" lets a task's SIGTERM handler finish.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { jobrt, jobrtBin, killExecWithForker } from "../helpers/jobrt.js";
import { type FaultSite, expectNoLeaks, faultSite, waitFor } from "../helpers/leaks.js";
import { statePluginDir } from "./stateplugin.js";

interface Entry {
  pid: number;
  hook: string;
  task?: number;
  state?: { setupPid: number; nonce: string; job: number; nested: unknown };
  returned?: { setupPid: number; nonce: string };
  afterCrash?: boolean;
}

let plugins: string;
beforeAll(() => {
  plugins = statePluginDir();
});

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

function site(killWait = 1): FaultSite & { log: string } {
  const s = faultSite(`PluginDir=${plugins}\nRuntimePlugins=none,statecheck\n`);
  // faultSite writes KillWait=1; this test needs its own.
  writeFileSync(
    join(s.dir, "jobrt.conf"),
    readFileSync(join(s.dir, "jobrt.conf"), "utf8").replace("KillWait=1", `KillWait=${killWait}`),
  );
  const log = join(s.dir, "hooks.log");
  s.env.STATECHECK_LOG = log;
  return { ...s, log };
}

const entries = (s: { log: string }): Entry[] =>
  existsSync(s.log)
    ? readFileSync(s.log, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Entry)
    : [];

function start(
  s: FaultSite,
  args: string[],
  env: Record<string, string> = {},
): { child: ChildProcess; out: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, ["--", jobrtBin, ...args], {
    env: { ...process.env, ...s.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let out = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr?.setEncoding("utf8").on("data", (d: string) => (out += d));
  return { child, out: () => out, exit: new Promise((r) => child.on("exit", (code) => r(code))) };
}

describe("step state (API 2)", () => {
  it("one jobrt exec's setup state reaches taskInit, run and cleanup of another jobrt exec of the step, and jobrt gc after SIGKILL", async () => {
    const s = site();
    const job = String(800_000 + Math.floor(Math.random() * 100_000));
    const slurm = (task: number) => ({
      SLURM_JOB_ID: job,
      SLURM_STEP_ID: "3",
      SLURM_PROCID: String(task),
      SLURM_LOCALID: String(task),
      SLURM_NTASKS: "2",
    });
    const go = join(s.tmp, "go");
    // Task 0's jobrt sets the step up first and keeps running.
    const a = start(
      s,
      ["exec", "--runtime", "statecheck", "--", "sh", "-c", `while [ ! -e ${go} ]; do sleep 0.05; done`],
      slurm(0),
    );
    await waitFor(() => entries(s).some((e) => e.hook === "run" && e.pid === a.child.pid), "task 0's run");
    const published = entries(s).find((e) => e.hook === "setup" && e.pid === a.child.pid)?.returned;
    expect(published?.setupPid).toBe(a.child.pid);

    // Task 1's jobrt runs its own (idempotent) setup, but every later hook gets the step's state.
    const b = await jobrt(["exec", "--runtime", "statecheck", "--", "true"], { env: { ...s.env, ...slurm(1) } });
    expect(b.stderr).toBe("");
    expect(b.code).toBe(0);
    const ofB = entries(s).filter((e) => e.pid !== a.child.pid && e.hook !== "setup");
    expect(ofB.map((e) => e.hook)).toEqual(["taskInit", "run", "cleanup"]);
    for (const e of ofB)
      expect(e.state).toEqual({ ...published, job: Number(job), nested: { list: [1, "two", null] } });
    const ownSetupOfB = entries(s).find((e) => e.hook === "setup" && e.pid !== a.child.pid)?.returned;
    expect(ownSetupOfB?.nonce).not.toBe(published?.nonce);

    // Task 0's jobrt dies without cleaning up, its task forker too: jobrt gc runs cleanup with the
    // journaled state.
    killExecWithForker(a.child.pid!);
    await a.exit;
    expect(entries(s).some((e) => e.hook === "cleanup" && e.pid === a.child.pid)).toBe(false);
    const gc = await jobrt(["gc"], { env: s.env });
    expect(gc.code).toBe(0);
    expect(gc.stdout).toBe(`gc: step ${job}.3: killed 1 task process group(s); cleaned up statecheck\n`);
    const byGc = entries(s).filter((e) => e.hook === "cleanup" && e.afterCrash);
    expect(byGc).toHaveLength(1);
    expect(byGc[0]?.state?.nonce).toBe(published?.nonce);
    expect(byGc[0]?.state?.setupPid).toBe(a.child.pid);
    // The step's shared state went with its last entry: nothing is left in SpoolDir.
    await expectNoLeaks(s);
  });

  it.each(["symlink", "fifo"])(
    "a %s planted where the step's shared state goes is never followed or read: each jobrt exec keeps its own state",
    async (kind) => {
      const s = site();
      const job = String(900_000 + Math.floor(Math.random() * 90_000));
      const jobDir = join(s.spool, "jobs", job);
      mkdirSync(jobDir, { recursive: true, mode: 0o700 });
      const bait = join(s.tmp, "bait.json");
      writeFileSync(bait, JSON.stringify({ setupPid: 1, nonce: "planted" }));
      if (kind === "symlink") symlinkSync(bait, join(jobDir, "exec-3.state"));
      else execFileSync("mkfifo", [join(jobDir, "exec-3.state")]);
      const slurm = { SLURM_JOB_ID: job, SLURM_STEP_ID: "3", SLURM_PROCID: "0", SLURM_LOCALID: "0", SLURM_NTASKS: "1" };
      const r = await jobrt(["exec", "--runtime", "statecheck", "--", "true"], {
        env: { ...s.env, ...slurm },
        timeoutMs: 30_000,
      });
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      const own = entries(s).find((e) => e.hook === "setup")?.returned;
      const later = entries(s).filter((e) => e.hook !== "setup");
      expect(later.map((e) => e.hook)).toEqual(["taskInit", "run", "cleanup"]);
      for (const e of later) expect(e.state?.nonce).toBe(own?.nonce);
      rmSync(bait);
      // The last entry out removed what was planted (without following it) and the job dir.
      expect(existsSync(jobDir)).toBe(false);
      await expectNoLeaks(s);
    },
  );

  it("jobrt run's setup state is journaled: jobrt gc after SIGKILL gets it in cleanup (afterCrash)", async () => {
    const s = site();
    const r = start(s, ["run", "-n", "2", "--runtime", "statecheck", "sleep", "600"]);
    await waitFor(() => entries(s).filter((e) => e.hook === "run").length === 2, "both runs");
    const returned = entries(s).find((e) => e.hook === "setup")?.returned;
    for (const e of entries(s).filter((e) => e.hook === "taskInit" || e.hook === "run"))
      expect(e.state?.nonce).toBe(returned?.nonce);
    r.child.kill("SIGKILL");
    await r.exit;
    const gc = await jobrt(["gc"], { env: s.env });
    expect(gc.code).toBe(0);
    const cleanup = entries(s).filter((e) => e.hook === "cleanup");
    expect(cleanup).toHaveLength(1);
    expect(cleanup[0]).toMatchObject({ afterCrash: true, state: { nonce: returned?.nonce, setupPid: r.child.pid } });
    await expectNoLeaks(s);
  });

  it("a request field the runtime does not accept is refused once, before setup, in one line", async () => {
    const s = site();
    const r = await jobrt(["run", "--runtime", "statecheck", "--container-module", "gpu", "true"], { env: s.env });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'jobrt: --container-module "gpu": runtime statecheck does not accept --container-module (it takes no container options)\n',
    );
    expect(entries(s).map((e) => e.hook)).toEqual(["cleanup"]);
    await expectNoLeaks(s);
  });
});

/**
 * The task is a wrapper that forwards SIGTERM to its worker (as runc run does). The worker's
 * SIGTERM handler needs about a second and writes its last line through a helper process of the
 * task (`cat`). Delivered to the whole group, the signal also kills the helper, so the handler's
 * last line is lost and the worker dies of SIGPIPE; delivered to the leader only, it finishes.
 */
const WRAPPER = `
pipe(my $r, my $w) or die;
my $cat = fork // die; if (!$cat) { close $w; open STDIN, "<&", $r; exec "cat"; die }
my $kid = fork // die; if (!$kid) { close $r; open STDOUT, ">&", $w; exec "/bin/sh", "-c", $ENV{WORKER}; die }
close $r; close $w;
$SIG{TERM} = sub { kill "TERM", $kid };
waitpid($kid, 0); my $st = $?; waitpid($cat, 0);
exit($st & 127 ? 128 + ($st & 127) : $st >> 8);
`;
const WORKER = `trap 'echo draining; sleep 1; echo finished; exit 0' TERM; echo ready; while :; do sleep 0.05; done`;

describe('ExecSpec signals: "leader"', () => {
  it.each([
    ["leader", 0, true],
    ["group", 141, false],
  ])("signals %s: jobrt exits %i, the SIGTERM handler's last line arrives: %s", async (signals, status, finished) => {
    const s = site(5);
    const r = start(s, ["run", "--runtime", "statecheck", "perl", "-e", WRAPPER], {
      STATECHECK_SIGNALS: signals,
      WORKER,
    });
    await waitFor(() => r.out().includes("ready"), "the worker to be ready");
    r.child.kill("SIGTERM");
    expect(await r.exit).toBe(status);
    expect(r.out().includes("finished")).toBe(finished);
    await expectNoLeaks(s);
  });
});
