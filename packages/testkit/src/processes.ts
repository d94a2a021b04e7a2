import { readFileSync, readdirSync } from "node:fs";
import { type ProcStat, procStat } from "@jobrt/host-services";

/** A process as the leftover checks see it: one line of /proc/<pid>/stat. */
export type ProcessInfo = ProcStat;

/** Every process visible in /proc right now. */
export function processTable(): ProcessInfo[] {
  const out: ProcessInfo[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const info = procStat(Number(name));
    if (info) out.push(info);
  }
  return out;
}

/**
 * Processes that are still running (zombies do not count: they have exited and only wait for
 * their parent to reap them, as under `bwrap --unshare-pid`) and belong to a step: in the process
 * group or session of one of `leaders` (the tasks started), or descendants of `ancestor` (the
 * process that called the plugin's hooks, which is where a helper started by setup lands) that
 * were not there in `before`.
 */
export function liveStepProcesses(options: {
  leaders?: readonly number[];
  ancestor?: number;
  before?: ReadonlySet<number>;
}): ProcessInfo[] {
  const table = processTable();
  const byPid = new Map(table.map((p) => [p.pid, p]));
  const leaders = new Set(options.leaders ?? []);
  const descends = (p: ProcessInfo): boolean => {
    const seen = new Set<number>();
    for (let q: ProcessInfo | undefined = p; q && !seen.has(q.pid); q = byPid.get(q.ppid)) {
      seen.add(q.pid);
      if (q.ppid === options.ancestor) return true;
    }
    return false;
  };
  return table.filter((p) => {
    if (p.state === "Z" || p.pid === process.pid) return false;
    if (leaders.has(p.pgrp) || leaders.has(p.session)) return true;
    return options.ancestor !== undefined && !options.before?.has(p.pid) && descends(p);
  });
}

/** True while a process of group `pgid` is running (zombies do not count). */
export function processGroupAlive(pgid: number): boolean {
  return processTable().some((p) => p.pgrp === pgid && p.state !== "Z");
}

/**
 * Running processes whose command line holds `mark` (zombies do not count). A mark in the task's
 * argv finds its processes wherever they went: another session, another process group, or a pid
 * namespace whose own pids mean nothing on the host.
 */
export function markedProcesses(mark: string): ProcessInfo[] {
  return processTable().filter((p) => {
    if (p.state === "Z" || p.pid === process.pid) return false;
    try {
      return readFileSync(`/proc/${p.pid}/cmdline`, "utf8").includes(mark);
    } catch {
      return false;
    }
  });
}
