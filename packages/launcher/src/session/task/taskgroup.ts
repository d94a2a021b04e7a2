import type { ExecSpec } from "@jobrt/core";
import type { StdioItem, TaskProcess } from "../forker/forker.js";
import { type TaskEnd, decideTaskEnd, deliverStop, startFailureEnd } from "./supervision.js";
import { type ProcTrackMode, createTracker } from "../proctrack/proctrack.js";
import { dropTo, spawnTaskProcess } from "../forker/spawn.js";

/** One task to start: its id in the step, the step's user and group, and its three stdio items. */
export interface TaskStart {
  taskId: number;
  uid: number;
  gid: number;
  stdio: StdioItem[];
}

/**
 * Tasks started outside a step session as the session starts them (the testkit's `launchTask`, a
 * runtime's own test host): so what they test is what sites run.
 */
export interface TaskGroup {
  /**
   * Starts a task from its ExecSpec through the one spawn path (spawn.ts): its own session and
   * process group, born in its task cgroup where there is one, as uid/gid when the host is root.
   */
  start(spec: ExecSpec, task: TaskStart): Promise<TaskProcess>;
  /**
   * Delivers a stop signal (SIGINT/SIGTERM) to the task started from `spec` as a step session
   * does: its process group, its leader alone (`signals: "leader"`), or into its sandbox
   * (`supervise.stop`).
   */
  stop(spec: ExecSpec, task: TaskStart, pid: number, signal: NodeJS.Signals): void;
  /**
   * The task's end as a step session decides it: from its process's raw wait status once it closed
   * (`child.waitStatus`), or from the error `start` rejected with (127/126 for a program that
   * could not be executed; an error that is no exec failure is thrown again).
   */
  end(spec: ExecSpec, task: TaskStart, outcome: TaskProcess | Error): TaskEnd;
  /** SIGKILLs everything of one task (its cgroup, else its process group). */
  killTask(taskId: number, pid: number | undefined): void;
  /** SIGKILLs everything of every task. */
  killAll(): void;
  /** Waits up to `timeoutMs` for the last process to go, then removes the group's cgroups. */
  close(timeoutMs?: number): Promise<void>;
}

/**
 * A group named `name` (unique on this node while it lives), tracked as a step is under `procTrack`
 * (default auto: cgroup2, else the v1 freezer, else process groups; "pgid": process groups only,
 * as on a node without cgroups, so a test sees what a task leaves when nothing else kills it).
 */
export function createTaskGroup(name: string, procTrack: ProcTrackMode = "auto"): TaskGroup {
  const tracker = createTracker(procTrack, name);
  const hostUid = process.getuid?.() ?? 0;
  return {
    start(spec, { taskId, uid, gid, stdio }) {
      const user = dropTo(hostUid, uid, gid);
      return spawnTaskProcess(spec, { stdio, tracker, taskId, ...(user ? { user } : {}) });
    },
    stop: (spec, { uid, gid }, pid, signal) => deliverStop(spec, pid, signal, dropTo(hostUid, uid, gid)),
    end(spec, { uid, gid }, outcome) {
      if (!(outcome instanceof Error))
        return decideTaskEnd(spec, outcome.waitStatus ?? null, dropTo(hostUid, uid, gid));
      const code = (outcome as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "EACCES") return startFailureEnd(spec, outcome);
      throw outcome;
    },
    killTask: (taskId, pid) => tracker.killTask(taskId, pid),
    killAll: () => tracker.killAll(),
    async close(timeoutMs = 5000) {
      await tracker.waitEmpty(timeoutMs);
      tracker.release();
    },
  };
}
