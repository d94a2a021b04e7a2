import { readFileSync } from "node:fs";
import { procStat } from "@jobrt/host-services";

/**
 * A process's start time in clock ticks since boot (/proc/<pid>/stat field 22), or undefined when
 * it is gone. A pid plus its start time names one process for good, even after the pid is reused.
 */
export function processStartTime(pid: number): string | undefined {
  const start = procStat(pid)?.startTime;
  return start === undefined ? undefined : String(start);
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
  const stat = procStat(pid);
  return stat !== undefined && String(stat.startTime) === startTime && stat.state !== "Z" && stat.state !== "X";
}
