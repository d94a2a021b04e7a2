import { type ExecSpec, NOT_SUPPORTED, type NotSupported, type StepRecord, type TaskRecord } from "@jobrt/core";
import { createTracker, dropTo, spawnTaskProcess } from "@jobrt/launcher";

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
}

let launches = 0;

/**
 * Starts a task through the launcher's own spawn path, as `jobrt run` does: the ExecSpec `run`
 * returned (or for NOT_SUPPORTED the task's own argv, env and the step's cwd), in its own process
 * group and the step's cgroup where there is one, as step.uid/step.gid when running as root; sets
 * `task.pid`; waits for it, and, as the host does at a task's end, kills what it left behind.
 */
export function launchTask(result: ExecSpec | NotSupported, step: StepRecord, task: TaskRecord, options: LaunchOptions = {}): Promise<LaunchResult> {
  const spec: ExecSpec = result === NOT_SUPPORTED ? { argv: task.argv, env: task.env, cwd: step.cwd } : result;
  if (spec.argv[0] === undefined) return Promise.reject(new Error("launchTask: empty argv"));
  const tracker = createTracker("auto", `testkit.${process.pid}.${launches++}`);
  const user = dropTo(process.getuid?.() ?? 0, step.uid, step.gid);
  return new Promise<LaunchResult>((resolve, reject) => {
    spawnTaskProcess(spec, { stdio: ["pipe", "pipe", "pipe"], tracker, taskId: task.globalId, ...(user ? { user } : {}) }).then((child) => {
      task.pid = child.pid;
      let stdout = "";
      let stderr = "";
      child.stdout?.setEncoding("utf8").on("data", (d: string) => {
        stdout += d;
      });
      child.stderr?.setEncoding("utf8").on("data", (d: string) => {
        stderr += d;
      });
      const timer = setTimeout(() => tracker.killTask(task.globalId, child.pid), options.timeoutMs ?? 60_000);
      child.on("exit", () => tracker.killTask(task.globalId, child.pid));
      child.on("close", (code, signal) => {
        clearTimeout(timer);
        resolve({ code, signal, stdout, stderr, pid: child.pid, argv: spec.argv });
      });
      child.stdin?.on("error", () => {});
      child.stdin?.end(options.input ?? "");
    }, reject);
  }).finally(async () => {
    await tracker.waitEmpty(5000);
    tracker.release();
  });
}

/** True while any process of the process group `pgid` exists. */
export function processGroupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
