import { lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";
import {
  type CleanupContext,
  IMAGE_OPTION_KEY,
  type NodeConf,
  type StepRecord,
  isJobrtError,
  messageOf,
} from "@jobrt/core";
import { commandTimeouts } from "./commandtimeouts.js";
import { trustedCrashState } from "./crashstate.js";
import { type FileOpResult, removeEmptyDir, runFileOps } from "@jobrt/host-services";
import { releaseImageOfStep } from "./image/request.js";
import { type OciStepState, type StepState, identityFor, stateFromJson } from "./ocistepstate.js";
import { resolveConf } from "./resolveconf.js";
import { isStepDirOf } from "./stepdir.js";
import { stepPlace, taskDirOf } from "./stepplace.js";
import { type TaskState, commandContext } from "./taskstate.js";
import { type TeardownResult, teardownTask } from "./taskteardown.js";

function existsNoFollow(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * The tasks of this record that may have a container: those whose task dir exists (a task dir is
 * made before its container, so a task without one never had a container).
 */
function tasksToTearDown(st: StepState, step: StepRecord, afterCrash: boolean): TaskState[] {
  const out: TaskState[] = [];
  for (const task of step.tasks) {
    const taskDir = taskDirOf(st, task);
    if (!existsNoFollow(taskDir)) continue;
    const { values, runtimeEnv } = commandContext(st, task, taskDir);
    // After a crash the journaled task's pid is not this host's child.
    out.push({ task: afterCrash ? { ...task, pid: undefined } : task, taskDir, values, runtimeEnv } as TaskState);
  }
  return out;
}

/** The cleanup hook; throws when a container's cgroup dirs stay, so gc keeps the step for another try. */
export async function cleanup(ctx: CleanupContext<OciStepState>): Promise<void> {
  const left: TaskState[] = [];
  await cleanupStep(ctx, left);
  // Not a warning: gc must report the step as not cleaned up, and keep it for another try.
  const kept = (ts: TaskState) => (ctx.afterCrash ? ` (kept ${ts.taskDir})` : "");
  if (left.length > 0)
    throw new Error(left.map((ts) => `task ${ts.task.localId}: ${ts.cgroupsLeft}${kept(ts)}`).join("; "));
}

/** Cleanup proper; the tasks whose container's cgroup dirs could not be removed go into `left`. */
async function cleanupStep(
  { node, step, state, afterCrash }: CleanupContext<OciStepState>,
  left: TaskState[],
): Promise<void> {
  const warn = (m: string) => node.log("warn", `runtime oci: ${m}`);
  let st: StepState | undefined;
  try {
    st = cleanupState(node, step, state, afterCrash);
  } catch (error) {
    // The host's own configuration unreadable now: gc keeps the step for another try.
    if (afterCrash && isJobrtError(error)) throw error;
    warn(`cleanup: ${messageOf(error)}`);
    return;
  }
  if (!st) {
    // No state: setup failed before it made anything (its error is the one the user needs), or
    // never ran.
    node.log("debug", "runtime oci: cleanup: no step state from setup; nothing to do");
    return;
  }
  try {
    const tasks = tasksToTearDown(st, step, afterCrash);
    const results = await tearDownTasks(node, step, st, tasks, afterCrash, warn);
    left.push(...tasks.filter((ts) => ts.cgroupsLeft !== undefined));
    if (st.conf.disableCleanup) return;
    await removeTaskDirs(st, tasks, results, afterCrash, warn);
    await removeStepDir(node, st, warn);
  } catch (error) {
    warn(`cleanup: ${messageOf(error)}`);
  } finally {
    await releaseImage(node, step, st, afterCrash);
  }
}

/** Every task's container torn down at once; a teardown that throws counts as one that left it. */
function tearDownTasks(
  node: NodeConf,
  step: StepRecord,
  st: StepState,
  tasks: TaskState[],
  afterCrash: boolean,
  warn: (m: string) => void,
): Promise<TeardownResult[]> {
  return Promise.all(
    tasks.map((ts) =>
      teardownTask(node, step, st, ts, afterCrash).catch((error): TeardownResult => {
        warn(`task ${ts.task.localId}: teardown failed: ${messageOf(error)}`);
        return "left";
      }),
    ),
  );
}

/**
 * A task whose container could not be deleted keeps its dir (its config.json, and the step dir
 * with the runtime's state), so nothing that may still run loses its files. So does, in gc, a
 * task whose container's cgroup dirs still hold processes: the next gc tries again with it (after
 * a run, nothing would come back for it).
 */
async function removeTaskDirs(
  st: StepState,
  tasks: TaskState[],
  results: TeardownResult[],
  afterCrash: boolean,
  warn: (m: string) => void,
): Promise<void> {
  const done = tasks.filter((ts, i) => results[i] !== "left" && !(afterCrash && ts.cgroupsLeft !== undefined));
  for (const [i, ts] of tasks.entries())
    if (results[i] === "left") warn(`task ${ts.task.localId}: container may still exist; keeping ${ts.taskDir}`);
  report(
    runFileOps(
      done.map((ts) => ({ op: "remove", path: ts.taskDir })),
      st.identity,
    ),
    warn,
  );
}

/**
 * Under srun every task has its own jobrt: the step dir is shared. Once no task dir is left (no
 * task of this step is between taskInit and cleanup on this node), whatever the runtime or a
 * wrapper left in %m goes too (runtime-oci.md W14), then the dir itself.
 */
async function removeStepDir(node: NodeConf, st: StepState, warn: (m: string) => void): Promise<void> {
  let names: string[];
  try {
    names = readdirSync(st.stepDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") warn(`cannot list ${st.stepDir}: ${messageOf(error)}`);
    return;
  }
  if (names.some((n) => n.startsWith("task-"))) {
    node.log("debug", `runtime oci: ${st.stepDir} still holds other tasks' dirs; left for them`);
    return;
  }
  report(
    runFileOps(
      names.map((n) => ({ op: "remove", path: join(st.stepDir, n) })),
      st.identity,
    ),
    warn,
  );
  if (st.identity && !isStepDirOf(st.stepDir, st.identity)) {
    warn(`not removing ${st.stepDir}: it is not a directory of uid ${st.identity.uid}, as setup made it`);
    return;
  }
  try {
    if (!removeEmptyDir(st.stepDir)) node.log("debug", `runtime oci: ${st.stepDir} is in use again; left`);
  } catch (error) {
    warn(`cannot remove ${st.stepDir}: ${messageOf(error)}`);
  }
}

/**
 * This process's own in-use mark; after a crash the dead host's mark is stale already, but the
 * step's pin dir still goes.
 */
async function releaseImage(node: NodeConf, step: StepRecord, st: StepState, afterCrash: boolean): Promise<void> {
  const image = st.image && !afterCrash ? st.image : undefined;
  if (st.image || st.request.options[IMAGE_OPTION_KEY]) await releaseImageOfStep(node, step, image);
}

/** Cleanup's state: after a crash, only what trustedCrashState keeps of the journaled one. */
function cleanupState(
  node: NodeConf,
  step: StepRecord,
  state: OciStepState | undefined,
  afterCrash: boolean,
): StepState | undefined {
  if (!afterCrash) return stateFromJson(state, step);
  return trustedCrashState(state, step, {
    // The record's PATH is the user's: the embedded default's runc is looked for on the host's.
    conf: () => resolveConf(node, { ...step, env: {} }),
    timeouts: () => commandTimeouts(),
    identity: identityFor(step),
    nodeName: node.nodeName,
    place: (conf, bundle, rootfs) => stepPlace(node, step, conf, bundle, rootfs),
    journaled: () => stateFromJson(state, step),
  });
}

function report(results: FileOpResult[], warn: (m: string) => void): void {
  for (const r of results) {
    if (r.ok && Array.isArray(r.value) && r.value.length > 0) warn(`left behind: ${r.value.join("; ")}`);
    else if (!r.ok) warn(r.error);
  }
}
