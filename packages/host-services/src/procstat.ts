import { readFileSync } from "node:fs";

/** The fields of /proc/<pid>/stat that jobrt reads (proc(5)). */
export interface ProcStat {
  pid: number;
  /** The command name: up to 15 bytes, and it may hold spaces and parentheses. */
  comm: string;
  /** R, S, D, Z (zombie), T, X (dead), ... */
  state: string;
  ppid: number;
  /** Process group id. */
  pgrp: number;
  session: number;
  /** Start time in clock ticks since boot: a pid plus its start time names one process for good. */
  startTime: number;
  /** The exit status as waitpid(2) would report it: meaningful for a zombie only. */
  exitCode: number;
}

/** Parses the text of /proc/<pid>/stat; undefined when it is cut short. */
export function parseProcStat(text: string): ProcStat | undefined {
  // The command name may hold spaces and ')': the fields after it start after the last ')'.
  const close = text.lastIndexOf(")");
  const fields = text
    .slice(close + 2)
    .trim()
    .split(" ");
  if (close < 0 || fields.length < 20) return undefined;
  const n = (i: number) => Number(fields[i]);
  return {
    pid: Number.parseInt(text, 10),
    comm: text.slice(text.indexOf("(") + 1, close),
    state: fields[0] as string,
    ppid: n(1),
    pgrp: n(2),
    session: n(3),
    startTime: n(19),
    exitCode: n(fields.length - 1),
  };
}

/** /proc/<pid>/stat, or undefined when there is no such process (any more). */
export function procStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  return parseProcStat(text);
}

/** True while `pid` exists and has not exited: a zombie (dead, not yet reaped) counts as gone. */
export function processRunning(pid: number): boolean {
  const state = procStat(pid)?.state;
  return state !== undefined && state !== "Z" && state !== "X";
}
