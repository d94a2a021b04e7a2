import { readFileSync } from "node:fs";

export interface ProcStat {
  state: string;
  ppid: number;
  /** Process group id. */
  pgrp: number;
  /** Start time in clock ticks since boot (identifies a pid across reuse). */
  startTime: number;
  /** The exit status as waitpid(2) would report it; meaningful for a zombie we may ptrace-read. */
  exitCode: number;
}

/** /proc/<pid>/stat, or undefined when there is no such process. */
export function procStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name may hold spaces and parentheses: fields start after the last ')'.
  const fields = text.slice(text.lastIndexOf(")") + 2).trim().split(" ");
  return {
    state: fields[0] ?? "?",
    ppid: Number(fields[1]),
    pgrp: Number(fields[2]),
    startTime: Number(fields[19]),
    exitCode: Number(fields[fields.length - 1]),
  };
}

/** Decodes a waitpid status: exit code, or the terminating signal number. */
export function decodeWaitStatus(status: number): { code?: number; signal?: number } {
  const sig = status & 0x7f;
  if (sig === 0) return { code: (status >> 8) & 0xff };
  return { signal: sig };
}
