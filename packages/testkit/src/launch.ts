import { type ExecSpec, NOT_SUPPORTED, type NotSupported, type StepRecord, type TaskRecord } from "@jobrt/core";
import { type TaskGroup, type TaskProcess, type TaskStart, createTaskGroup } from "@jobrt/launcher";

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
   * signal delivered as the launcher delivers it (its process group, only the process started for
   * `signals: "leader"`, into the sandbox for `supervise.stop`), then SIGKILL of everything of the
   * task after `killWaitMs`. `leaderOnly`: the signal to the started process alone, whatever the
   * spec says (a SIGKILL of the wrapper alone, as the OOM killer sends it).
   */
  stop?: { after: string; signal?: NodeJS.Signals; killWaitMs: number; leaderOnly?: boolean };
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
 * `task.pid`; waits for it, and, as the host does at a task's end, kills what it left behind. Its
 * exit status is the launcher's decision (a wrapper's missing command included, whose one line
 * is appended to `stderr`).
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
  const start: TaskStart = { taskId: task.globalId, uid: step.uid, gid: step.gid, stdio: ["pipe", "pipe", "pipe"] };
  return tasks
    .start(spec, start)
    .then(
      (child) => {
        if (child.pid !== undefined) task.pid = child.pid;
        return watchTask({ tasks, spec, start, child, options });
      },
      (error: Error) => unstartable(tasks, spec, start, error),
    )
    .finally(() => tasks.close(5000));
}

/** One started task of launchTask, with what its watch needs. */
interface Launched {
  tasks: TaskGroup;
  spec: ExecSpec;
  start: TaskStart;
  child: TaskProcess;
  options: LaunchOptions;
}

/** Collects the task's output, stops it when asked, kills what it leaves, and reports its end. */
function watchTask({ tasks, spec, start, child, options }: Launched): Promise<LaunchResult> {
  return new Promise((resolve) => {
    let stdout = "";
    let stderr = "";
    let killTimer: NodeJS.Timeout | undefined;
    const stop = options.stop;
    child.stdout?.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
      if (stop && killTimer === undefined && stdout.includes(stop.after) && child.pid !== undefined)
        killTimer = stopTask(tasks, spec, start, child.pid, stop);
    });
    child.stderr?.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => tasks.killTask(start.taskId, child.pid), options.timeoutMs ?? 60_000);
    child.on("exit", () => tasks.killTask(start.taskId, child.pid));
    child.on("close", (_code, signal) => {
      clearTimeout(timer);
      clearTimeout(killTimer);
      const end = tasks.end(spec, start, child);
      if (end.message) stderr += `${end.message}\n`;
      resolve({ code: end.code, signal, stdout, stderr, pid: child.pid, argv: spec.argv });
    });
    child.stdin?.on("error", () => {});
    child.stdin?.end(options.input ?? "");
  });
}

/** The stop signal as the host delivers it (or to the leader alone), then SIGKILL after KillWait. */
function stopTask(
  tasks: TaskGroup,
  spec: ExecSpec,
  start: TaskStart,
  pid: number,
  stop: NonNullable<LaunchOptions["stop"]>,
): NodeJS.Timeout {
  const signal = stop.signal ?? "SIGTERM";
  if (!stop.leaderOnly) tasks.stop(spec, start, pid, signal);
  else
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  return setTimeout(() => tasks.killTask(start.taskId, pid), stop.killWaitMs);
}

/** The host reports a program it cannot start as the shell does: 127 not found, 126 not executable. */
function unstartable(tasks: TaskGroup, spec: ExecSpec, start: TaskStart, error: Error): LaunchResult {
  let end: ReturnType<TaskGroup["end"]>;
  try {
    end = tasks.end(spec, start, error);
  } catch {
    throw error;
  }
  return { code: end.status, signal: null, stdout: "", stderr: `${error.message}\n`, pid: undefined, argv: spec.argv };
}
