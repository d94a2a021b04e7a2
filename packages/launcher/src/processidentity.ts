import { readFileSync } from "node:fs";

/**
 * A process's start time in clock ticks since boot (/proc/<pid>/stat field 22), or undefined when
 * it is gone. A pid plus its start time names one process for good, even after the pid is reused.
 */
export function processStartTime(pid: number): string | undefined {
  return statField(readStat(pid), 19);
}

function readStat(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
}

/**
 * Field `index` + 3 of a /proc/<pid>/stat text (0: the state), undefined for a process that is
 * gone. Found by scanning, not split: the start time is read for every task a step starts.
 */
function statField(stat: string | undefined, index: number): string | undefined {
  if (stat === undefined) return undefined;
  // The command name (field 2) is in parentheses and may itself contain spaces or ')'.
  let start = stat.lastIndexOf(")") + 2;
  for (let i = 0; i < index; i++) {
    start = stat.indexOf(" ", start) + 1;
    if (start === 0) return undefined;
  }
  const end = stat.indexOf(" ", start);
  return stat.slice(start, end < 0 ? undefined : end);
}

/** True while `pid` exists and has not exited: a zombie (dead, not yet reaped) counts as gone. */
export function processRunning(pid: number): boolean {
  const state = statField(readStat(pid), 0);
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
  const stat = readStat(pid);
  const state = statField(stat, 0);
  return state !== undefined && statField(stat, 19) === startTime && state !== "Z" && state !== "X";
}
