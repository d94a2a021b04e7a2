import { readFileSync } from "node:fs";

/**
 * A process's start time in clock ticks since boot (/proc/<pid>/stat field 22), or undefined when
 * it is gone. A pid plus its start time names one process for good, even after the pid is reused.
 */
export function processStartTime(pid: number): string | undefined {
  return statFields(pid)?.[19];
}

/** Fields 3 onwards of /proc/<pid>/stat (state first), or undefined when the process is gone. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) is in parentheses and may itself contain spaces or ')'.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** True while `pid` exists and has not exited: a zombie (dead, not yet reaped) counts as gone. */
export function processRunning(pid: number): boolean {
  const state = statFields(pid)?.[0];
  return state !== undefined && state !== "Z" && state !== "X";
}

/** This boot's id: pids and start times from another boot mean nothing. */
export function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "unknown";
  }
}

/**
 * True when `pid` is the very process that was recorded with `startTime` during this boot, and it
 * has not exited: a dead host whose parent has not reaped it yet must not keep its step alive.
 */
export function isSameProcess(pid: number, startTime: string | undefined, boot: string): boolean {
  if (boot !== bootId() || startTime === undefined) return false;
  const fields = statFields(pid);
  return fields !== undefined && fields[19] === startTime && fields[0] !== "Z" && fields[0] !== "X";
}
