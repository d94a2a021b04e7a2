import { type StdioOptions, spawn } from "node:child_process";
import { type JobrtError, jobrtError } from "@jobrt/core";

/** A runtime command that could not run or did not finish, naming its oci.conf key. */
function commandError(code: "ERR_RUNTIME_COMMAND" | "ERR_RUNTIME_TIMEOUT", problem: string, key: string): JobrtError {
  return jobrtError(code, { problem }, { details: { runtime: "runtime/oci", key } });
}

export interface CommandOptions {
  /** oci.conf key the command came from, for messages. */
  key: string;
  env: Record<string, string>;
  cwd: string;
  uid?: number;
  gid?: number;
  timeoutMs: number;
  /** "capture": collect stdout/stderr; "inherit": the caller's stdio (the task's). */
  stdio: "capture" | "inherit";
}

export interface CommandResult {
  /** Exit code, or undefined when killed by a signal. */
  code: number | undefined;
  signal: NodeJS.Signals | undefined;
  stdout: string;
  stderr: string;
}

const LIMIT = 1 << 20;
/** How long output may keep arriving after the command exited. */
const PIPE_GRACE_MS = 250;

/**
 * Runs a RunTime* command as `/bin/sh -c`. The result is taken when the shell exits, not when
 * its pipes close, so a runtime that hands a pipe to a long-lived process cannot hang us (runtime-oci.md W2).
 * Past `timeoutMs` the command's process group is SIGKILLed and ERR_RUNTIME_TIMEOUT names it.
 */
export function runShellCommand(command: string, o: CommandOptions): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const stdio: StdioOptions = o.stdio === "inherit" ? ["inherit", "inherit", "inherit"] : ["ignore", "pipe", "pipe"];
    const child = spawn("/bin/sh", ["-c", command], {
      env: o.env,
      cwd: o.cwd,
      stdio,
      // Captured commands get their own process group so a time-out can kill all of it.
      // Inherited ones stay in ours, so the host's signals to the task group reach them too.
      detached: o.stdio === "capture",
      ...(o.uid !== undefined ? { uid: o.uid, gid: o.gid ?? o.uid } : {}),
    });
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (d: string) => {
      if (stdout.length < LIMIT) stdout += d;
    });
    child.stderr?.setEncoding("utf8").on("data", (d: string) => {
      if (stderr.length < LIMIT) stderr += d;
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        if (child.pid !== undefined) process.kill(o.stdio === "capture" ? -child.pid : child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }, o.timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(commandError("ERR_RUNTIME_COMMAND", `${o.key}: cannot start /bin/sh: ${error.message}`, o.key));
    });
    // Output the command wrote before it exited may still sit in the pipe when 'exit' fires (seen
    // under load: `runc state` JSON cut short, read as "no container"). Wait for both pipes to end,
    // but only briefly: a grandchild that inherited a pipe (runc's container init) may hold it for ever.
    const ended = (s: NodeJS.ReadableStream | null) =>
      s ? new Promise<void>((r) => s.once("end", r).once("close", r)) : Promise.resolve();
    const drained = Promise.all([ended(child.stdout), ended(child.stderr)]);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      let grace: NodeJS.Timeout | undefined;
      void Promise.race([
        drained,
        new Promise<void>((r) => {
          grace = setTimeout(r, PIPE_GRACE_MS);
        }),
      ]).then(() => {
        clearTimeout(grace);
        child.stdout?.destroy();
        child.stderr?.destroy();
        if (timedOut) {
          reject(commandError("ERR_RUNTIME_TIMEOUT", timedOutMessage(o.key, o.timeoutMs, command), o.key));
          return;
        }
        resolve({ code: code ?? undefined, signal: signal ?? undefined, stdout, stderr });
      });
    });
  });
}

/** The message of a command killed at its time-out (createstart.pl words it the same). */
export function timedOutMessage(key: string, timeoutMs: number, command: string): string {
  return `${key} did not finish within ${timeoutMs / 1000} s and was killed: ${command}`;
}

export interface ContainerState {
  status: string;
  pid?: number;
}

/** Parses a RunTimeQuery result: OCI state JSON with a `status`; anything else means "no container". */
export function parseState(r: CommandResult): ContainerState | undefined {
  if (r.code !== 0) return undefined;
  try {
    const s = JSON.parse(r.stdout) as { status?: unknown; pid?: unknown };
    if (typeof s?.status !== "string") return undefined;
    return { status: s.status, ...(typeof s.pid === "number" && s.pid > 0 ? { pid: s.pid } : {}) };
  } catch {
    return undefined;
  }
}
