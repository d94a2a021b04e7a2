import { statSync } from "node:fs";
import {
  type ExecSpec,
  NOT_SUPPORTED,
  type NodeConf,
  type RuntimeRegistry,
  type StepStateText,
  type TaskRecord,
  jobrtError,
  messageOf,
} from "@jobrt/core";
import { type FileUser, asUser } from "@jobrt/host-services";
import type { PlannedComponent } from "../plan.js";
import type { ProcessTracker } from "../proctrack/proctrack.js";
import type { TaskProcess } from "../forker/forker.js";
import { type TaskSpawner, dropTo } from "../forker/spawn.js";
import { signalName } from "./status.js";
import { type TaskEnd, decideTaskEnd, deliverStop, startFailureEnd } from "./supervision.js";
import type { StepStdio } from "../stdio/stdio.js";
import type { StopControl } from "./stop.js";

import type { StepEvent } from "../events.js";

/** What a task needs from its session. */
export interface TaskContext {
  registry: RuntimeRegistry;
  node: NodeConf;
  /** Each component's runtime step state, from its setup. */
  states: StepStateText[];
  tracker: ProcessTracker;
  spawner: TaskSpawner;
  stop: StopControl;
  /** Where the task's files are and its output goes (a joined task's are its own: nothing to do). */
  stdio: Pick<StepStdio, "closeTask" | "attach">;
  label: boolean;
  emit: (event: StepEvent) => void;
  report: (line: string) => void;
  /** A task could not be launched: the session reports it once and stops the other tasks. */
  fail: (error: unknown, what: string) => void;
  /** True once the step is being stopped (a signal, or another task's launch failure). */
  stopping: () => boolean;
  /** The status of a task that was stopped before it started. */
  stoppedStatus: () => number;
}

/** Asks the runtime what to start for a task: its ExecSpec, or the task's own argv. */
async function execSpecFor(
  ctx: TaskContext,
  index: number,
  c: PlannedComponent,
  task: TaskRecord,
  state: StepStateText,
): Promise<ExecSpec> {
  const call = { node: ctx.node, step: c.record, task, state };
  await ctx.registry.taskInit(index, call);
  const result = await ctx.registry.run(index, call);
  return result === NOT_SUPPORTED ? { argv: task.argv, env: task.env, cwd: c.record.cwd } : result;
}

/**
 * Whether `path` is missing, as `user` sees it: root must not tell a user what it may not see. One
 * the user may not look into is left to the task's start, which enters it as the user and says so.
 */
function isMissingDirectory(path: string, user: FileUser | undefined): boolean {
  try {
    return !asUser(user, () => statSync(path).isDirectory());
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "EACCES";
  }
}

/**
 * Runs one task to its end and returns its status: taskInit, run, spawn through the one spawn path,
 * copy its output, and when its process exits, kill whatever it left in its cgroup (or group).
 */
export async function runTask(
  ctx: TaskContext,
  index: number,
  componentIndex: number,
  c: PlannedComponent,
  task: TaskRecord,
  onSpawn: (child: TaskProcess) => void,
): Promise<number> {
  let spec: ExecSpec;
  try {
    spec = await execSpecFor(ctx, index, c, task, ctx.states[componentIndex]);
  } catch (error) {
    ctx.stdio.closeTask(task);
    ctx.fail(error, `task ${task.globalId}`);
    return 1;
  }
  if (ctx.stopping()) {
    ctx.stdio.closeTask(task);
    return ctx.stoppedStatus();
  }
  const user = dropTo(ctx.node.hostUid, c.record.uid, c.record.gid);
  if (isMissingDirectory(spec.cwd, user)) {
    ctx.stdio.closeTask(task);
    ctx.fail(
      jobrtError("ERR_LAUNCH", {
        problem: `task ${task.globalId}: cannot change to directory ${spec.cwd}: no such directory`,
      }),
      "",
    );
    return 1;
  }
  ctx.node.log("verbose", `task ${task.globalId}: exec ${JSON.stringify(spec.argv)} in ${spec.cwd}`);
  let started: Promise<TaskProcess>;
  try {
    started = ctx.spawner.start(task.globalId, spec, { tracker: ctx.tracker, ...(user ? { user } : {}) });
  } catch (error) {
    ctx.stdio.closeTask(task);
    ctx.fail(
      jobrtError("ERR_LAUNCH", { problem: `task ${task.globalId}: cannot start ${spec.argv[0]}: ${messageOf(error)}` }),
      "",
    );
    return 1;
  }
  ctx.stdio.closeTask(task);
  let child: TaskProcess;
  try {
    child = await started;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).syscall === "chdir")
      return cannotEnter(ctx, task, spec, error as NodeJS.ErrnoException);
    return cannotExecute(ctx, componentIndex, task, startFailureEnd(spec, error as NodeJS.ErrnoException));
  }
  onSpawn(child);
  return waitForTask(ctx, componentIndex, task, spec, child, user);
}

/** The task's directory could not be entered as its user (after the uid drop): it is not started. */
function cannotEnter(ctx: TaskContext, task: TaskRecord, spec: ExecSpec, error: NodeJS.ErrnoException): number {
  const why =
    error.code === "EACCES"
      ? "permission denied"
      : error.code === "ENOENT" || error.code === "ENOTDIR"
        ? "no such directory"
        : messageOf(error);
  ctx.fail(
    jobrtError("ERR_LAUNCH", { problem: `task ${task.globalId}: cannot change to directory ${spec.cwd}: ${why}` }),
    "",
  );
  return 1;
}

/** The task's program could not be executed: 127 when not found, 126 when not executable. */
function cannotExecute(ctx: TaskContext, componentIndex: number, task: TaskRecord, end: TaskEnd): number {
  ctx.report(`task ${task.globalId}: ${end.message}`);
  ctx.emit({
    event: "task-exit",
    task: task.globalId,
    component: componentIndex,
    code: end.code,
    signal: null,
    status: end.status,
    error: end.error ?? "",
  });
  return end.status;
}

function waitForTask(
  ctx: TaskContext,
  componentIndex: number,
  task: TaskRecord,
  spec: ExecSpec,
  child: TaskProcess,
  user: FileUser | undefined,
): Promise<number> {
  return new Promise<number>((resolve) => {
    const pid = child.pid as number;
    task.pid = pid;
    ctx.stop.started(pid, (signal) => deliverStop(spec, pid, signal, user));
    ctx.emit({
      event: "task-start",
      task: task.globalId,
      component: componentIndex,
      pid,
      exec: spec.argv === task.argv ? null : spec,
      argv: spec.argv,
    });
    const pipes = ctx.stdio.attach(child, task, ctx.label, (stream, data) =>
      ctx.emit({ event: "output", task: task.globalId, stream, data }),
    );
    child.stdin?.on("error", () => {});
    child.on("exit", () => {
      ctx.stop.ended(pid);
      // Like proctrack at a task's end: whatever it left behind (daemons included) goes too, so
      // its pipes close and nothing of it outlives the task.
      ctx.tracker.killTask(task.globalId, pid);
      releaseHeldPipes(ctx, child);
    });
    child.on("close", async () => {
      // Decided once, from the raw wait status: the wrapper's failed exec may be a missing command.
      const end = decideTaskEnd(spec, child.waitStatus ?? null, user);
      const signal = end.signal === null ? null : signalName(end.signal);
      task.exit = { code: end.code, signal };
      await Promise.all(pipes);
      if (end.message) ctx.report(`task ${task.globalId}: ${end.message}`);
      const { code, status } = end;
      ctx.emit({ event: "task-exit", task: task.globalId, component: componentIndex, code, signal, status });
      resolve(status);
    });
  });
}

/**
 * A process outside the task's tracking can hold its pipes open for ever: without a cgroup one
 * that left the task's group (setsid); with one, a container whose runtime moved it into the
 * runtime's own cgroup (a created, never started OCI container whose supervisor was killed).
 * After KillWait jobrt stops reading them so the step can end and its cleanup can run.
 */
function releaseHeldPipes(ctx: TaskContext, child: TaskProcess): void {
  const timer = setTimeout(() => {
    if (child.stdout?.readableEnded === false || child.stderr?.readableEnded === false) {
      ctx.node.log(
        "warn",
        `task process ${child.pid} exited, but a process that escaped its process group still holds its output: output no longer read (ProcTrack=cgroup kills such processes unless they left the step's cgroup)`,
      );
      child.stdout?.destroy();
      child.stderr?.destroy();
    }
  }, Math.max(1, ctx.node.killWait) * 1000);
  timer.unref();
  child.once("close", () => clearTimeout(timer));
}
