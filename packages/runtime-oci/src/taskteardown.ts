import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type NodeConf, type StepRecord, isJobrtError } from "@jobrt/core";
import { procStat } from "@jobrt/host-services";
import { type CommandResult, runShellCommand } from "./command.js";
import { type FileOpResult, runFileOps } from "@jobrt/host-services";
import { type CutShortTask, cutShortCgroups } from "./leftovers.js";
import type { StepState } from "./ocistepstate.js";
import { expandPattern } from "./pattern.js";
import type { TaskState } from "./taskstate.js";
import { teardown } from "./teardown.js";
import { WATCHDOG_NAME, WATCHDOG_PID_FILE } from "./watchdog.js";

/**
 * What a create/start task's createstart.pl recorded in its task dir (read as the job user, like
 * every other file there): the container's pid, and whether its own RunTimeDelete succeeded. The
 * note is the task's word on the task's own container, which runs as the same user: trusting it
 * spares the query and gives the user nothing a runtime of their own could not. A createstart.pl
 * that was killed leaves its watchdog finishing an in-flight create and deleting the container:
 * that is waited for first, since a query before it is done would find no container yet and leak it.
 */
async function createStartNotes(
  st: StepState,
  ts: TaskState,
): Promise<{ pid?: number; watchdog: boolean; deleted: boolean }> {
  const [r, w, d] = runFileOps(
    [
      { op: "read", path: join(ts.taskDir, "container.pid") },
      { op: "read", path: join(ts.taskDir, WATCHDOG_PID_FILE) },
      { op: "read", path: join(ts.taskDir, "container.deleted") },
    ],
    st.identity,
  );
  const number = (x: FileOpResult | undefined) => {
    const n = x?.ok ? Number(String(x.value).trim()) : Number.NaN;
    return Number.isInteger(n) && n > 0 ? n : undefined;
  };
  const watchdog = number(w);
  if (watchdog !== undefined)
    await waitForWatchdog(watchdog, st.timeouts.create + st.timeouts.kill + st.timeouts.delete);
  const pid = number(r);
  return { ...(pid !== undefined ? { pid } : {}), watchdog: watchdog !== undefined, deleted: d?.ok === true };
}

/** Waits (bounded) until `pid` is no longer a running create/start watchdog. */
async function waitForWatchdog(pid: number, boundMs: number): Promise<void> {
  const running = () => {
    const s = procStat(pid);
    if (!s || s.state === "Z" || s.state === "X") return false;
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(WATCHDOG_NAME);
    } catch {
      return false;
    }
  };
  const end = Date.now() + boundMs;
  for (let delay = 2; running() && Date.now() < end; delay = Math.min(delay * 2, 50))
    await new Promise((r) => setTimeout(r, delay));
}

/** Is `pid` still the host's own, running child (so it cannot be a recycled pid)? */
function ownChildRunning(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  const s = procStat(pid);
  return s !== undefined && s.state !== "Z" && s.state !== "X" && s.ppid === process.pid;
}

export type TeardownResult = Awaited<ReturnType<typeof teardown>>;

/** SIGKILL to a task's process, with the job user's rights. */
async function forceKillTask(st: StepState, pid: number): Promise<void> {
  // A task process leads its own process group (the host starts it so): kill all of it, so
  // a runtime that the RunTimeRun shell started as its child goes too.
  const target = procStat(pid)?.pgrp === pid ? -pid : pid;
  if (st.identity) {
    await runShellCommand(`kill -s KILL -- ${target}`, {
      key: "SIGKILL",
      env: { PATH: "/usr/bin:/bin" },
      cwd: "/",
      timeoutMs: 5000,
      stdio: "capture",
      ...st.identity,
    }).catch(() => undefined);
    return;
  }
  try {
    process.kill(target, "SIGKILL");
  } catch {
    // already gone
  }
}

/** Kills and deletes a task's container (teardown.ts) with the commands and pid this task used. */
export async function teardownTask(
  node: NodeConf,
  step: StepRecord,
  st: StepState,
  ts: TaskState,
  afterCrash: boolean,
): Promise<TeardownResult> {
  // A task the host never started has no container; after a crash nothing is known, so ask.
  if (!afterCrash && ts.task.pid === undefined) return "gone";
  if (removedByItself(st, ts)) return "gone";
  const cwd = existsSync(step.cwd) ? step.cwd : "/";
  const { recorded, createInFlight, deleted } = await recordedContainer(st, ts);
  if (deleted) return "gone";
  const pidNow = () => containerPid(st, ts, recorded);
  const log: TaskLog = (level, m) => node.log(level, `runtime oci: task ${ts.task.localId}: ${m}`);
  // A task process that died of SIGKILL was killed by the host after its KillWait (or by a second
  // signal): that grace has been spent, so the container gets no second one. Otherwise a stop
  // would take KillWait twice (the host's wait, then this one).
  const graceSpent = ts.task.exit?.signal === "SIGKILL";
  const runKey = keyRunner(st, ts, cwd, pidNow, log);
  const result = await teardown({
    hasQuery: st.conf.commands.RunTimeQuery !== undefined,
    graceMs: graceSpent ? 0 : Math.min(Math.max(node.killWait * 1000, 500), 10_000),
    alive: () => pidNow() !== undefined,
    ...(pidNow() !== undefined ? { pid: pidNow() as number } : {}),
    run: runKey,
    forceKill: (pid) => forceKillTask(st, pid),
    log,
  });
  if (result === "gone") await sweepCutShort(st, ts, { createInFlight, afterCrash, runKey, log });
  log("debug", `teardown: ${result}`);
  return result;
}

type TaskLog = (level: "verbose" | "debug" | "warn", m: string) => void;
type ControlKey = "RunTimeQuery" | "RunTimeKill" | "RunTimeDelete";

/**
 * The embedded default's `runc run` removes its container when it exits by itself: an exit it
 * reported (not a signal, not runc's own 125+ failure range) leaves nothing to query or delete.
 * This spares one runc process per task at cleanup; site oci.conf commands are always queried.
 */
function removedByItself(st: StepState, ts: TaskState): boolean {
  const exit = ts.task.exit;
  return Boolean(
    st.conf.embedded && st.conf.mode === "run" && exit && exit.signal === null && exit.code !== null && exit.code < 125,
  );
}

/** create/start: what createstart.pl recorded in the (user-owned) task dir. */
async function recordedContainer(
  st: StepState,
  ts: TaskState,
): Promise<{ recorded: number | undefined; createInFlight: boolean; deleted: boolean }> {
  if (st.conf.mode !== "create-start") return { recorded: undefined, createInFlight: false, deleted: false };
  const notes = await createStartNotes(st, ts);
  return { recorded: notes.pid, createInFlight: notes.watchdog && notes.pid === undefined, deleted: notes.deleted };
}

/** The container's pid while it runs: the task's own in run mode, the recorded one in create/start. */
function containerPid(st: StepState, ts: TaskState, recorded: number | undefined): number | undefined {
  if (st.conf.mode === "run") return ownChildRunning(ts.task.pid) ? ts.task.pid : undefined;
  const s = recorded !== undefined ? procStat(recorded) : undefined;
  return s && s.state !== "Z" ? recorded : undefined;
}

/** Runs a control command as the job user, with %p as it is now; undefined when it cannot be expanded. */
function keyRunner(
  st: StepState,
  ts: TaskState,
  cwd: string,
  pidNow: () => number | undefined,
  log: TaskLog,
): (key: ControlKey) => Promise<CommandResult | undefined> {
  const { values, runtimeEnv: env } = ts;
  return async (key) => {
    const pattern = st.conf.commands[key];
    if (pattern === undefined) return undefined;
    const pid = pidNow();
    let command: string;
    try {
      command = expandPattern(pattern, { ...values, ...(pid !== undefined ? { pid } : {}) }, { shell: true });
    } catch (error) {
      if (isJobrtError(error, "ERR_CONF_PATTERN")) {
        log("debug", `${key} not run: ${error.message}`);
        return undefined;
      }
      throw error;
    }
    log("debug", `${key}: ${command}`);
    const timeoutMs =
      key === "RunTimeDelete" ? st.timeouts.delete : key === "RunTimeKill" ? st.timeouts.kill : st.timeouts.query;
    const r = await runShellCommand(command, { key, env, cwd, timeoutMs, stdio: "capture", ...(st.identity ?? {}) });
    if (r.code !== 0) log("debug", `${key} exited with ${r.code ?? r.signal}: ${r.stderr.trim()}`);
    return r;
  };
}

/**
 * After a teardown that found no container: a create cut short by a kill leaves runtime state and
 * cgroup dirs that no query shows; they are deleted and removed here (docs/runtime-oci.md, "A
 * create cut short").
 */
async function sweepCutShort(
  st: StepState,
  ts: TaskState,
  o: {
    createInFlight: boolean;
    afterCrash: boolean;
    runKey: (key: "RunTimeDelete") => Promise<unknown>;
    log: CutShortTask["log"];
  },
): Promise<void> {
  const { createInFlight, afterCrash, runKey, log } = o;
  // The supervisor and its watchdog died while RunTimeCreate ran (e.g. gc killed the step's cgroup),
  // or a killed `runc run` may have been half-way through its create: either leaves runtime state
  // the query does not see (runc: its state dir, with only exec.fifo if it was killed before any
  // cgroup dir). RunTimeDelete removes it; the cgroup dirs the create made are removed here.
  const key = createInFlight
    ? "RunTimeCreate"
    : st.conf.mode === "run" && (afterCrash || ts.task.exit?.signal)
      ? "RunTimeRun"
      : undefined;
  if (key === undefined) return;
  // A run-mode task killed by a signal may as well have had its container made and gone.
  const uncertain = key === "RunTimeRun";
  log(
    uncertain ? "debug" : "verbose",
    `${key} ${uncertain ? "may have been" : "was"} cut short: running RunTimeDelete anyway`,
  );
  await runKey("RunTimeDelete").catch(() => undefined);
  ts.cgroupsLeft = await cutShortCgroups({ ...cutShortTask(st, ts, key, afterCrash, log), uncertain });
}

/** What leftovers.ts needs to find and remove the cgroup dirs of a task's container. */
function cutShortTask(
  st: StepState,
  ts: TaskState,
  key: "RunTimeCreate" | "RunTimeRun",
  afterCrash: boolean,
  log: CutShortTask["log"],
): CutShortTask {
  const { RunTimeQuery, RunTimeDelete } = st.conf.commands;
  return {
    key,
    patterns: [st.conf.commands[key], RunTimeQuery, RunTimeDelete],
    values: ts.values,
    cgroupsPath: st.conf.ignoreFileConfigJson
      ? undefined
      : (st.bundleConfig?.config.linux as { cgroupsPath?: unknown } | undefined)?.cgroupsPath,
    hostCgroups: st.hostCgroups,
    uid: st.identity?.uid ?? process.getuid?.() ?? 0,
    identity: st.identity,
    afterCrash,
    log,
  };
}
