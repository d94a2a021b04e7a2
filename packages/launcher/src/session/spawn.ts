import { type ChildProcess, type StdioOptions, spawn } from "node:child_process";
import { closeSync, readFileSync, readdirSync } from "node:fs";
import type { ExecSpec } from "@jobrt/core";
import type { ProcessTracker } from "./proctrack.js";

/** How the one spawn path starts a task's process. */
export interface TaskProcessOptions {
  stdio: StdioOptions;
  /** Run as this user and group (only when the host is root and they are not root's). */
  user?: { uid: number; gid: number };
  /** Where the process is tracked; without one it has only its own process group. */
  tracker?: ProcessTracker;
  /** The task's global id (names its cgroup). */
  taskId: number;
}

const O_CLOEXEC = 0o2000000;

/**
 * Closes every descriptor above 2 that this process inherited without close-on-exec (Node opens
 * all of its own with it): a task must start with exactly 0, 1 and 2, whoever started jobrt.
 */
export function closeInheritedDescriptors(): void {
  let fds: string[];
  try {
    fds = readdirSync("/proc/self/fd");
  } catch {
    return;
  }
  for (const name of fds) {
    const fd = Number(name);
    if (!(fd > 2)) continue;
    try {
      const flags = /^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"))?.[1];
      if (flags !== undefined && (Number.parseInt(flags, 8) & O_CLOEXEC) === 0) closeSync(fd);
    } catch {
      // the listing's own descriptor, already closed
    }
  }
}

/**
 * Starts one task process: the ExecSpec's argv with its env in its cwd, in a new session and process
 * group, as the step's user, inside the step's tracker. The launcher, the testkit and the runtimes'
 * own tests all start tasks here, so what they test is what sites run.
 */
export function spawnTaskProcess(spec: ExecSpec, options: TaskProcessOptions): ChildProcess {
  const [file, ...args] = spec.argv;
  if (file === undefined) throw new Error("spawnTaskProcess: empty argv");
  const start = () =>
    spawn(file, args, {
      cwd: spec.cwd,
      env: spec.env,
      stdio: options.stdio,
      detached: true,
      ...(options.user ? { uid: options.user.uid, gid: options.user.gid } : {}),
    });
  return options.tracker ? options.tracker.startInside(options.taskId, start) : start();
}

/** The user a root host drops to for a step's tasks, if any. */
export function dropTo(hostUid: number, uid: number, gid: number): { uid: number; gid: number } | undefined {
  return hostUid === 0 && (uid !== 0 || gid !== 0) ? { uid, gid } : undefined;
}
