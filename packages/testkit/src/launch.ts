import {
  type ExecSpec,
  NOT_SUPPORTED,
  type NotSupported,
  type SignalDelivery,
  type StepRecord,
  type TaskRecord,
} from "@jobrt/core";
import { createTaskGroup } from "@jobrt/launcher";

export interface LaunchResult {
  code: number | null;
  /** Node's name of the signal that killed the task, or "signal N" (a real-time signal). */
  signal: string | null;
  stdout: string;
  stderr: string;
  pid: number | undefined;
  /** The argv that was started. */
  argv: string[];
}

export interface LaunchOptions {
  /** SIGKILL the task's process group after this many ms. Default 60 000. */
  timeoutMs?: number;
  input?: string;
  /**
   * Stops the task as the host stops a cancelled step, once its stdout contains `after`: the stop
   * signal to its process group, or only to the process started when the spec says
   * `signals: "leader"`, then SIGKILL of everything of the task after `killWaitMs`.
   */
  stop?: { after: string; signal?: NodeJS.Signals; killWaitMs: number };
  /**
   * How the task's processes are tracked and killed at its end: "auto" (default) as ProcTrack=auto
   * (its cgroup where there is one), "pgid" by its process group only, as on a node without cgroups.
   */
  procTrack?: "auto" | "pgid";
}

let launches = 0;

/**
 * Starts a task through the launcher's own spawn path, as `jobrt run` does: the ExecSpec `run`
 * returned (or for NOT_SUPPORTED the task's own argv, env and the step's cwd), in its own process
 * group and the step's cgroup where there is one, as step.uid/step.gid when running as root; sets
 * `task.pid`; waits for it, and, as the host does at a task's end, kills what it left behind.
 */
export function launchTask(
  result: ExecSpec | NotSupported,
  step: StepRecord,
  task: TaskRecord,
  options: LaunchOptions = {},
): Promise<LaunchResult> {
  const spec: ExecSpec = result === NOT_SUPPORTED ? { argv: task.argv, env: task.env, cwd: step.cwd } : result;
  if (spec.argv[0] === undefined) return Promise.reject(new Error("launchTask: empty argv"));
  const tasks = createTaskGroup(`testkit.${process.pid}.${launches++}`, options.procTrack ?? "auto");
  return new Promise<LaunchResult>((resolve, reject) => {
    const started = tasks.start(spec, {
      taskId: task.globalId,
      uid: step.uid,
      gid: step.gid,
      stdio: ["pipe", "pipe", "pipe"],
    });
    started.then(
      (child) => {
        if (child.pid !== undefined) task.pid = child.pid;
        let stdout = "";
        let stderr = "";
        let stopped = false;
        let killTimer: NodeJS.Timeout | undefined;
        const stop = options.stop;
        child.stdout?.setEncoding("utf8").on("data", (d: string) => {
          stdout += d;
          if (stop && !stopped && stdout.includes(stop.after) && child.pid !== undefined) {
            stopped = true;
            signalTask(child.pid, stop.signal ?? "SIGTERM", spec.signals ?? "group");
            killTimer = setTimeout(() => tasks.killTask(task.globalId, child.pid), stop.killWaitMs);
          }
        });
        child.stderr?.setEncoding("utf8").on("data", (d: string) => {
          stderr += d;
        });
        const timer = setTimeout(() => tasks.killTask(task.globalId, child.pid), options.timeoutMs ?? 60_000);
        child.on("exit", () => tasks.killTask(task.globalId, child.pid));
        child.on("close", (code, signal) => {
          clearTimeout(timer);
          clearTimeout(killTimer);
          resolve({ code, signal, stdout, stderr, pid: child.pid, argv: spec.argv });
        });
        child.stdin?.on("error", () => {});
        child.stdin?.end(options.input ?? "");
      },
      (error: NodeJS.ErrnoException) => {
        const result = unstartable(error, spec.argv);
        if (result) resolve(result);
        else reject(error);
      },
    );
  }).finally(() => tasks.close(5000));
}

/** The host reports a program it cannot start as the shell does: 127 not found, 126 not executable. */
function unstartable(error: NodeJS.ErrnoException, argv: string[]): LaunchResult | undefined {
  if (error.code !== "ENOENT" && error.code !== "EACCES") return undefined;
  return {
    code: error.code === "ENOENT" ? 127 : 126,
    signal: null,
    stdout: "",
    stderr: `${error.message}\n`,
    pid: undefined,
    argv,
  };
}

/** Delivers a stop signal as the launcher's StopControl does. */
function signalTask(pid: number, signal: NodeJS.Signals, delivery: SignalDelivery): void {
  try {
    process.kill(delivery === "leader" ? pid : -pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}
