import { createReadStream } from "node:fs";
import { CommandError, type CommandResult, describeResult, timedOutMessage } from "./command.js";
import type { Resume } from "./fastpath.js";
import { killGroup, signalName } from "./signals.js";

/**
 * RunTimeCreate's result as the watchdog reports it: its exit status, one line on the pipe. Past
 * `timeoutMs` the watchdog's group (it and the create command) is killed, as runShellCommand does.
 */
export function watchdogCreate(
  w: { pid: number; fd: number },
  timeoutMs: number,
  command: string,
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    let text = "";
    const stream = createReadStream("", { fd: w.fd, encoding: "utf8" });
    const timer = setTimeout(() => {
      killGroup(w.pid);
      stream.destroy();
      reject(
        new CommandError(
          "ERR_RUNTIME_TIMEOUT",
          `RunTimeCreate did not finish within ${timeoutMs / 1000} s and was killed: ${command}`,
          "RunTimeCreate",
        ),
      );
    }, timeoutMs);
    stream.on("data", (d) => {
      text += String(d);
    });
    stream.on("error", () => {});
    stream.on("close", () => {
      clearTimeout(timer);
      const code = /^(\d+)\n/.exec(text)?.[1];
      if (code === undefined)
        reject(
          new CommandError(
            "ERR_RUNTIME_COMMAND",
            `RunTimeCreate: the watchdog (pid ${w.pid}) ended without its status: ${command}`,
            "RunTimeCreate",
          ),
        );
      else resolve({ code: Number(code), signal: undefined, stdout: "", stderr: "" });
    });
  });
}

/** RunTimeCreate's result as the fast path reported it. */
export function resumedCreate(
  create: NonNullable<Resume["create"]>,
  timeoutMs: number,
  command: string,
  watchdogPid: number | undefined,
): CommandResult {
  if (create === "timeout")
    throw new CommandError(
      "ERR_RUNTIME_TIMEOUT",
      timedOutMessage("RunTimeCreate", timeoutMs, command),
      "RunTimeCreate",
    );
  if (create === "lost")
    throw new CommandError(
      "ERR_RUNTIME_COMMAND",
      `RunTimeCreate: the watchdog (pid ${watchdogPid}) ended without its status: ${command}`,
      "RunTimeCreate",
    );
  return { code: create, signal: undefined, stdout: "", stderr: "" };
}

/** The message for a RunTimeStart (or the wait after it) that failed in the fast path. */
export function resumedStartFailure(resume: Resume, timeoutMs: number, command: string): string {
  const start = resume.start;
  if (start === "timeout") return timedOutMessage("RunTimeStart", timeoutMs, command);
  if (start === 0 || start === undefined)
    return "the container exited but its exit status is not available (see docs/runtime-oci.md, create/start mode)";
  const result: CommandResult =
    typeof start === "number"
      ? { code: start, signal: undefined, stdout: "", stderr: "" }
      : { code: undefined, signal: signalName(Number(start.slice(3))) ?? "SIGKILL", stdout: "", stderr: "" };
  return `RunTimeStart ${describeResult(result)}: ${command}`;
}
