import { readFileSync } from "node:fs";

/**
 * A process's start time in clock ticks since boot (/proc/<pid>/stat field 22), or undefined when
 * it is gone. A pid plus its start time names one process for good, even after the pid is reused.
 */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) is in parentheses and may itself contain spaces or ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[19];
  } catch {
    return undefined;
  }
}

/** This boot's id: pids and start times from another boot mean nothing. */
export function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "unknown";
  }
}

/** True when `pid` is the very process that was recorded with `startTime` during this boot. */
export function isSameProcess(pid: number, startTime: string | undefined, boot: string): boolean {
  return boot === bootId() && startTime !== undefined && processStartTime(pid) === startTime;
}
