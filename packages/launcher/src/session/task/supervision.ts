import { readFileSync } from "node:fs";
import { type ExecSpec, type MissingCommandCheck, lookupCommand, messageOf } from "@jobrt/core";
import { type FileUser, asUser, decodeWaitStatus, procStat } from "@jobrt/host-services";

/**
 * How a task ended, as jobrt reports it. Decided once, here, from the raw wait status its parent
 * (the task forker) reported, and the ExecSpec's `supervise` (docs/decisions.md, "The host
 * supervises a wrapper's task").
 */
export interface TaskEnd {
  /** srun's status: the exit code, 128+N for signal N, 127/126 for a command the sandbox lacks. */
  status: number;
  /** The exit code jobrt reports (127/126 for a missing command), or null when a signal ended it (or its end was lost). */
  code: number | null;
  /** The number of the signal that ended it, or null. */
  signal: number | null;
  /** One line when the status is not what the process reported or it never ran: why. */
  message?: string;
  /** Why the program could not be executed at all ("command not found"). */
  error?: string;
}

/**
 * The task's end from its raw wait status (`null`: lost, the forker died before it reported). A
 * wrapper's failed exec (an exit code its `supervise` declares) becomes 127/126 only when the
 * command is certainly missing in the sandbox.
 */
export function decideTaskEnd(spec: ExecSpec, waitStatus: number | null, user?: FileUser): TaskEnd {
  if (waitStatus === null) return { status: 1, code: null, signal: null };
  const { code, signal } = decodeWaitStatus(waitStatus);
  if (signal !== undefined) return { status: 128 + signal, code: null, signal };
  const check = spec.supervise?.missingCommand;
  if (check?.exitCodes.includes(code)) {
    const missing = missingInSandbox(check, user);
    if (missing) return { ...missing, code: missing.status, signal: null };
  }
  return { status: code, code, signal: null };
}

/** The end of a task whose program could not be executed: 127 not found, 126 not executable, as a shell says. */
export function startFailureEnd(spec: ExecSpec, error: NodeJS.ErrnoException): TaskEnd {
  const status = error.code === "ENOENT" ? 127 : error.code === "EACCES" ? 126 : 1;
  const why = status === 127 ? "command not found" : status === 126 ? "permission denied" : messageOf(error);
  return { status, code: status, signal: null, message: `cannot execute ${spec.argv[0]}: ${why}`, error: why };
}

/**
 * Looks the command up as the job user sees the sandbox (root must not read what the user may
 * not): 127 or 126 only for a certain answer, undefined for anything else.
 */
function missingInSandbox(check: MissingCommandCheck, user?: FileUser): Omit<TaskEnd, "code" | "signal"> | undefined {
  let result: ReturnType<typeof lookupCommand>;
  try {
    result = asUser(user, () => lookupCommand(check.view, check.command, check.path, check.cwd));
  } catch {
    return undefined;
  }
  if (result.kind === "missing")
    return { status: 127, message: `${check.command}: command not found in the container (exit status 127)` };
  if (result.kind === "not-executable")
    return {
      status: 126,
      message: `${check.command}: ${result.path} in the container is not an executable file (exit status 126)`,
    };
  return undefined;
}

/**
 * Delivers a stop signal (SIGINT/SIGTERM) to a task as its ExecSpec says: its whole process group
 * (default), the process started alone (`signals: "leader"`, a wrapper that forwards), or the
 * process group of that process's only child (`supervise.stop: "child-group"`: the sandbox's init
 * and the task under it, which the wrapper does not forward to). A pid read from /proc may be
 * gone and reused by then: the child is signalled only while /proc still names the wrapper its
 * parent, and with the job user's effective ids, so not another user's process.
 */
export function deliverStop(spec: ExecSpec, pid: number, signal: NodeJS.Signals, user?: FileUser): void {
  if (spec.supervise?.stop === "child-group") {
    const child = asUser(user, () => onlyChild(pid));
    if (
      child !== undefined &&
      asUser(user, () => procStat(child)?.ppid === pid && (kill(-child, signal) || kill(child, signal)))
    )
      return;
    kill(pid, signal);
    return;
  }
  if (spec.signals === "leader") kill(pid, signal);
  else kill(-pid, signal) || kill(pid, signal);
}

/** The pid of `pid`'s only child (Linux's /proc children list), or undefined. */
function onlyChild(pid: number): number | undefined {
  try {
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
    return kids.length === 1 ? Number(kids[0]) : undefined;
  } catch {
    return undefined;
  }
}

function kill(target: number, signal: NodeJS.Signals | number): boolean {
  try {
    process.kill(target, signal);
    return true;
  } catch {
    return false;
  }
}
