import { spawn } from "node:child_process";
import { type ExecSpec, NOT_SUPPORTED, type NotSupported, type StepRecord, type TaskRecord } from "@jobrt/core";

export interface LaunchResult {
  code: number | null;
  signal: NodeJS.Signals | null;
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

/**
 * Starts a task the way the host does: the ExecSpec `run` returned, or for NOT_SUPPORTED the task's
 * own argv with the task env in the step's cwd; in its own process group; as step.uid/step.gid
 * (both) when running as root and they differ from root's; sets `task.pid`; waits.
 */
export function launchTask(
  result: ExecSpec | NotSupported,
  step: StepRecord,
  task: TaskRecord,
  options: LaunchOptions = {},
): Promise<LaunchResult> {
  const spec: ExecSpec = result === NOT_SUPPORTED ? { argv: task.argv, env: task.env, cwd: step.cwd } : result;
  const [file, ...args] = spec.argv;
  if (file === undefined) return Promise.reject(new Error("launchTask: empty argv"));
  return new Promise((resolve, reject) => {
    const drop = process.getuid?.() === 0 && (step.uid !== 0 || step.gid !== 0) ? { uid: step.uid, gid: step.gid } : {};
    const child = spawn(file, args, { cwd: spec.cwd, env: spec.env, detached: true, stdio: ["pipe", "pipe", "pipe"], ...drop });
    if (child.pid !== undefined) task.pid = child.pid;
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          // the group is already gone
        }
      }
    }, options.timeoutMs ?? 60_000);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, pid: child.pid, argv: spec.argv });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(options.input ?? "");
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
