import { mkdirSync, readdirSync, realpathSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import {
  type ContainerRequest,
  type ExecSpec,
  NOT_SUPPORTED,
  type NodeConf,
  type NotSupported,
  type StepRecord,
} from "@jobrt/core";
import type { TestContext } from "vitest";
import type { CheckId } from "./checks.js";
import { uniqueJobId } from "./fixtures.js";
import type { PluginHost } from "./host.js";
import { type LaunchOptions, type LaunchResult, launchTask } from "./launch.js";
import type { LaunchCheckOptions } from "./options.js";
import { type ProcessInfo, liveStepProcesses, processTable } from "./processes.js";

type RunResult = ExecSpec | NotSupported;

export interface StepExtra {
  jobId?: number;
  tasks?: number | number[];
  argv?: string[];
  cwd?: string;
  env?: Record<string, string>;
  container?: Partial<ContainerRequest> | null;
}

/** What the suite hands the checks of this file: its fixtures and its way of calling hooks. */
export interface StepKit {
  check(id: CheckId, body: (ctx: TestContext) => Promise<void> | void): void;
  node(): NodeConf;
  step(extra?: StepExtra): StepRecord;
  tempDir(prefix: string): string;
  setupAndRun(node: NodeConf, step: StepRecord): Promise<RunResult[]>;
  host(): PluginHost;
  /** Calls a hook; a throw becomes an error naming the hook. */
  hook<T>(name: string, fn: () => T | Promise<T>): Promise<T>;
  cleanup(node: NodeConf, step: StepRecord): Promise<void>;
  fixtureContainer(): Partial<ContainerRequest> | undefined;
  runtimeName: string;
  launch: LaunchCheckOptions | undefined;
}

/** Variables a container runtime may set from the image or the user database instead of the host's. */
const CONTAINER_OWNED = new Set([
  "PATH",
  "HOME",
  "PWD",
  "OLDPWD",
  "SHLVL",
  "HOSTNAME",
  "TERM",
  "USER",
  "LOGNAME",
  "SHELL",
  "_",
]);

function fail(message: string): never {
  throw new Error(message);
}

const launchOne = (
  kit: StepKit,
  s: StepRecord,
  results: RunResult[],
  extra: LaunchOptions = {},
): Promise<LaunchResult[]> =>
  Promise.all(
    s.tasks.map((t, i) =>
      launchTask(results[i] as RunResult, s, t, { timeoutMs: kit.launch?.timeoutMs ?? 60_000, ...extra }),
    ),
  );

/** Runs one step of `extra` end to end (setup, hooks, launch when on, cleanup) and returns the launches. */
async function fullStep(kit: StepKit, n: NodeConf, s: StepRecord, extra: LaunchOptions = {}): Promise<LaunchResult[]> {
  try {
    const results = await kit.setupAndRun(n, s);
    return kit.launch ? await launchOne(kit, s, results, extra) : [];
  } finally {
    await kit.cleanup(n, s);
  }
}

const shown = (r: LaunchResult | undefined): string =>
  `exit ${r?.code ?? r?.signal}, stdout ${JSON.stringify(r?.stdout.slice(0, 300))}, stderr ${JSON.stringify(r?.stderr.trim().slice(0, 300))}`;

/** Polls briefly: a process SIGKILLed by cleanup may not have been scheduled to die yet. */
export async function leftovers(find: () => ProcessInfo[]): Promise<ProcessInfo[]> {
  let found = find();
  for (let i = 0; i < 30 && found.length > 0; i++) {
    await sleep(100);
    found = find();
  }
  return found;
}

/** The checks on what a task really gets (signals, exit status, env, cwd); all start real tasks. */
export function registerLaunchChecks(kit: StepKit): void {
  const ids = ["launch.sigterm", "launch.missing-command", "launch.env", "launch.cwd"] as const;
  if (!kit.launch) {
    for (const id of ids) kit.check(id, (ctx) => ctx.skip("real-launch checks turned off (launch: false)"));
    return;
  }
  kit.check("launch.sigterm", () => launchSigterm(kit));
  kit.check("launch.missing-command", () => launchMissingCommand(kit));
  kit.check("launch.env", () => launchEnv(kit));
  kit.check("launch.cwd", () => launchCwd(kit));
}

/** A stop signal reaches the task and its handler may finish within KillWait. */
async function launchSigterm(kit: StepKit): Promise<void> {
  const n = kit.node();
  // The handler takes a while (sleep 1) and prints only at its end, so a wrapper that kills the
  // task when it gets the signal itself is caught. Under a runtime's pid 1 the foreground sleep
  // delays the handler by at most a second.
  // Its first line tells a signal that never reached the task from a handler cut short.
  const script =
    "trap 'echo jobrt-testkit-got-term; sleep 1; echo jobrt-testkit-handled; exit 0' TERM; echo jobrt-testkit-ready; while :; do sleep 1; done";
  const s = kit.step({ tasks: 1, argv: ["sh", "-c", script] });
  const [r] = await fullStep(kit, n, s, { stop: { after: "jobrt-testkit-ready", killWaitMs: n.killWait * 1000 } });
  if (!r?.stdout.includes("jobrt-testkit-ready")) fail(`the task never started its SIGTERM test (${shown(r)})`);
  if (!r.stdout.includes("jobrt-testkit-handled")) {
    const why = r.stdout.includes("jobrt-testkit-got-term")
      ? 'it started and was cut short: the task was killed while it ran (a wrapper that dies of the signal takes its task with it; deliver stop signals to the process you start and forward them: ExecSpec.signals "leader", or let the host signal the sandbox: ExecSpec.supervise.stop)'
      : "it never started: the stop signal did not reach the task (a wrapper that forwards no signal, or a task outside the process group the host signals: see ExecSpec.signals and ExecSpec.supervise.stop)";
    fail(
      `the task's SIGTERM handler did not complete within KillWait (${n.killWait} s) after the host's stop signal: ${why} (${JSON.stringify(r.argv)}: ${shown(r)})`,
    );
  }
}

/** A command that does not exist exits 127, as the shell reports it. */
async function launchMissingCommand(kit: StepKit): Promise<void> {
  const n = kit.node();
  // A PATH every job user can search: a dir it may not enter turns "not found" into 126.
  const s = kit.step({
    tasks: 1,
    argv: ["jobrt-testkit-no-such-command"],
    env: { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" },
  });
  const [r] = await fullStep(kit, n, s);
  if (r?.code !== 127)
    fail(
      `a task whose command does not exist gave ${shown(r)}; expected exit 127 (command not found), as jobrt run and the shell report it`,
    );
}

/** The task gets its environment, as the container's own keys and --container-env leave it. */
async function launchEnv(kit: StepKit): Promise<void> {
  const n = kit.node();
  const c = kit.fixtureContainer();
  const s = kit.step({ tasks: 1, argv: ["env"], env: { JOBRT_TESTKIT_ENV: "two words, $HOME and 'quotes'" } });
  const want = { ...(s.tasks[0]?.env ?? {}) };
  for (const key of Object.keys(want))
    if (CONTAINER_OWNED.has(key) || (c?.clearEnv && !key.startsWith("SLURM_"))) delete want[key];
  for (const entry of c?.env ?? []) want[entry.slice(0, entry.indexOf("="))] = entry.slice(entry.indexOf("=") + 1);
  const [r] = await fullStep(kit, n, s);
  if (r?.code !== 0) fail(`the task \`env\` failed: ${shown(r)}`);
  const got = new Map(
    r.stdout.split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)] as const),
  );
  const wrong = Object.entries(want).filter(([k, v]) => got.get(k) !== v);
  if (wrong.length > 0) {
    const list = wrong
      .slice(0, 8)
      .map(([k, v]) => `${k} (want ${JSON.stringify(v)}, got ${got.has(k) ? JSON.stringify(got.get(k)) : "nothing"})`);
    fail(
      `the task's environment lacks ${wrong.length} of the ${Object.keys(want).length} variables it must get: ${list.join(", ")}${wrong.length > 8 ? ", ..." : ""}`,
    );
  }
}

/** The task runs in the step's cwd, the declared launch.cwd or --container-workdir. */
async function launchCwd(kit: StepKit): Promise<void> {
  const n = kit.node();
  const workdir = kit.fixtureContainer()?.workdir;
  const s = kit.step({ tasks: 1, argv: ["sh", "-c", "pwd -P"] });
  const want = workdir ?? kit.launch?.cwd?.(s) ?? realpathSync(s.cwd);
  const [r] = await fullStep(kit, n, s);
  const got = r?.stdout.trim().split("\n").at(-1);
  if (r?.code !== 0 || got !== want)
    fail(
      `the task ran in ${JSON.stringify(got)}, not ${workdir ? "--container-workdir" : kit.launch?.cwd ? "the declared launch.cwd" : "the step's cwd"} ${want} (${shown(r)})`,
    );
}

/** The checks on what a step leaves behind or disturbs: processes, temp files, other steps' files. */
export function registerCleanupChecks(kit: StepKit): void {
  kit.check("cleanup.processes", async () => {
    const n = kit.node();
    const s = kit.step({ tasks: 1 });
    const before = new Set(processTable().map((p) => p.pid));
    await fullStep(kit, n, s);
    const leaders = s.tasks.flatMap((t) => (t.pid === undefined ? [] : [t.pid]));
    const left = await leftovers(() => liveStepProcesses({ leaders, ancestor: process.pid, before }));
    for (const p of left) process.kill(p.pid, "SIGKILL");
    if (left.length > 0)
      fail(`still running after cleanup: ${left.map((p) => `pid ${p.pid} (${p.comm}, state ${p.state})`).join(", ")}`);
  });
  kit.check("cleanup.outside-spool", async () => {
    const n = kit.node();
    const jobId = uniqueJobId();
    const tmp = kit.tempDir("tmpdir");
    const s = kit.step({ jobId, tasks: 1, env: { TMPDIR: tmp } });
    const before = new Set(readdirSync("/tmp"));
    const saved = process.env.TMPDIR;
    // os.tmpdir() reads TMPDIR on every call, so whatever the hooks make there lands in this dir.
    process.env.TMPDIR = tmp;
    try {
      await fullStep(kit, n, s);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
    const inTmpdir = readdirSync(tmp);
    if (inTmpdir.length > 0) fail(`after cleanup TMPDIR (${tmp}) holds ${inTmpdir.slice(0, 8).join(", ")}`);
    // Other programs make files in /tmp at the same time: only names carrying this step's job id count.
    const inTmp = readdirSync("/tmp").filter((e) => !before.has(e) && e.includes(String(jobId)));
    if (inTmp.length > 0)
      fail(`after cleanup /tmp holds ${inTmp.map((e) => `/tmp/${e}`).join(", ")}, named after the step's job ${jobId}`);
  });
  kit.check("cleanup.other-steps", async () => {
    const n = kit.node();
    const other = uniqueJobId();
    const planted = [
      `jobrt-testkit-other.${other}`,
      join(`job${other}.0`, "keep"),
      join(kit.runtimeName, `jobrt-testkit-other.${other}.0`, "keep"),
    ].map((p) => join(n.spoolDir, p));
    for (const p of planted) {
      mkdirSync(dirname(p), { recursive: true });
      writeFileSync(p, "another step's file\n");
    }
    await fullStep(kit, n, kit.step());
    const left = new Set(readdirSync(n.spoolDir, { recursive: true }).map((p) => join(n.spoolDir, String(p))));
    const gone = planted.filter((p) => !left.has(p));
    if (gone.length > 0) fail(`cleanup removed ${gone.join(", ")}, which belong to another step`);
  });
}

/** Two steps with different requests set up concurrently: each task must run with its own. */
export function registerRequestCheck(kit: StepKit): void {
  kit.check("state.different-requests", async () => {
    const n = kit.node();
    const c = kit.fixtureContainer();
    const make = (label: string, tasks: number) => {
      const jobId = uniqueJobId();
      const mark = `jobrt-testkit-req-${label}${jobId}`;
      const s = kit.step({
        jobId,
        tasks,
        cwd: kit.tempDir("cwd"),
        env: { JOBRT_TESTKIT_MARK: mark },
        argv: ["sh", "-c", `echo "jobrt-testkit-${label}:$JOBRT_TESTKIT_MARK:$JOBRT_TESTKIT_REQ"`],
        ...(c ? { container: { ...c, env: [...(c.env ?? []), `JOBRT_TESTKIT_REQ=${mark}`] } } : {}),
      });
      return { label, mark, s };
    };
    const a = make("a", 1);
    const b = make("b", 2);
    const hooks = async (x: typeof a) => {
      await Promise.all(x.s.tasks.map((t) => kit.hook("taskInit", () => kit.host().taskInit(n, x.s, t))));
      return Promise.all(x.s.tasks.map((t) => kit.hook("run", () => kit.host().run(n, x.s, t))));
    };
    try {
      await Promise.all([a, b].map((x) => kit.hook(`setup(${x.label})`, () => kit.host().setup(n, x.s))));
      const rb = await hooks(b);
      const ra = await hooks(a);
      const inSpec = (x: typeof a, results: RunResult[], y: typeof a) => {
        const text = JSON.stringify(results.filter((r) => r !== NOT_SUPPORTED));
        for (const v of [y.mark, y.s.cwd])
          if (text.includes(v)) fail(`step ${x.label}'s ExecSpec holds ${v}, which is step ${y.label}'s`);
      };
      inSpec(a, ra, b);
      inSpec(b, rb, a);
      if (!kit.launch) return;
      const [la, lb] = await Promise.all([launchOne(kit, a.s, ra), launchOne(kit, b.s, rb)]);
      const expect = (x: typeof a, launched: LaunchResult[], y: typeof a) =>
        launched.forEach((r, i) => {
          // The mark arrives through the task env, or (with --container-clearenv) the request's env.
          const want = `jobrt-testkit-${x.label}:`;
          if (!r.stdout.startsWith(want) || !r.stdout.includes(x.mark) || r.stdout.includes(y.mark)) {
            fail(
              `step ${x.label} task ${x.s.tasks[i]?.globalId} printed ${JSON.stringify(r.stdout.slice(0, 300))}, expected ${want} and ${x.mark} (its own request), never ${y.mark}`,
            );
          }
        });
      expect(a, la, b);
      expect(b, lb, a);
    } finally {
      await kit.cleanup(n, b.s);
      await kit.cleanup(n, a.s);
    }
  });
}
