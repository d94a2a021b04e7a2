// The processes of one running Slurm step and their proportional set size (PSS, proc(5)
// smaps_rollup): a step's memory with each shared page split among the processes that map it, so
// 32 Node processes sharing one binary count it once in all, not 32 times as RSS would.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { procStat } from "../packages/host-services/dist/index.js";

/** The pids below the slurmstepd of any numbered step of `job` (not its batch or extern step). */
export function stepProcesses(job) {
  const children = new Map();
  const roots = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = procStat(Number(entry));
    if (stat === undefined) continue;
    if (!children.has(stat.ppid)) children.set(stat.ppid, []);
    children.get(stat.ppid).push(stat.pid);
    // Slurm titles a step's slurmstepd "slurmstepd: [job.step]"; batch and extern are not numbered.
    if (stat.comm === "slurmstepd" && new RegExp(`^slurmstepd: \\[${job}\\.\\d+\\]`).test(commandLine(stat.pid)))
      roots.push(stat.pid);
  }
  const out = [];
  const queue = roots.flatMap((r) => children.get(r) ?? []);
  while (queue.length) {
    const pid = queue.shift();
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

function commandLine(pid) {
  try {
    return readFileSync(join("/proc", String(pid), "cmdline"), "latin1").replaceAll("\0", " ");
  } catch {
    return "";
  }
}

/** PSS of `pid` in KiB; 0 once it has gone (or is a zombie, which maps nothing). */
export function pssKiB(pid) {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** The command names of `pids` (to count the step's running payloads). */
export function commands(pids) {
  return pids.map((pid) => procStat(pid)?.comm ?? "");
}
