import { mkdirSync } from "node:fs";
import { basename, dirname } from "node:path";
import { messageOf } from "@jobrt/core";
import { findHierarchy, moveInto, ownDir, procsOf, removeCgroupTree } from "../proctrack/cgroupfs.js";

/**
 * The task forker's own cgroup (docs/reliability.md, "The task forker's cgroup"). Slurm's
 * proctrack/cgroup SIGKILLs every process listed in the step's v1 freezer cgroup the moment the
 * task (jobrt) exits, but none in a cgroup below it: a forker born in a freezer cgroup of its own
 * below jobrt's outlives jobrt's SIGKILL there too, and ends that jobrt's containers (its
 * `jobrt gc --pid`). Journaled (TrackerRecord.forker) before it is made; removed by jobrt once the
 * forker is reaped, else by the gc that collects the step.
 */
const SUFFIX = ".forker";

/**
 * Where the forker of the step named `name` lives: below jobrt's own v1 freezer cgroup. None when
 * jobrt is in the freezer's root cgroup: nothing tracks it by freezer cgroup then.
 */
export function forkerCgroupPath(name: string): string | undefined {
  const h = findHierarchy(1);
  if (!h || h.own === "/") return undefined;
  return `${ownDir(h)}/jobrt-${name}${SUFFIX}`;
}

/**
 * Makes `dir` and moves the forker `pid` into it, before it has forked anything (it forks only on
 * jobrt's requests). Not jobrt itself for the fork: a job user cannot move back into Slurm's step
 * cgroup (its cgroup.procs is root's). A cgroup that cannot be made or joined is said (`warn`).
 */
export function moveToForkerCgroup(dir: string, pid: number, warn: (line: string) => void): void {
  try {
    mkdirSync(dir);
    moveInto(dir, pid);
  } catch (error) {
    warn(
      `the task forker runs in jobrt's own cgroup (${messageOf(error)}): if the host kills that cgroup together with jobrt, nothing ends jobrt's containers until the Epilog`,
    );
  }
}

/**
 * Removes the forker's cgroup of a step, with any empty cgroup below it (a root container's,
 * runc's own, once `runc delete` is done); returns why it could not. Run by the forker's own gc
 * (`jobrt gc --pid`, its child), it first takes itself and the forker back to the cgroup the
 * forker came from (nothing else runs there by then). A job user may not move into Slurm's step
 * cgroup (EACCES): that gc leaves the cgroup, empty once the forker exits (docs/reliability.md,
 * Known gaps 6).
 */
export function removeForkerCgroup(dir: string): string | undefined {
  const h = findHierarchy(1);
  if (!h || !dir.startsWith(`${h.mount}/`) || !basename(dir).startsWith("jobrt-") || !dir.endsWith(SUFFIX))
    return `not a task forker's cgroup: ${dir}`;
  const procs = procsOf(dir);
  if (procs.includes(process.pid)) {
    try {
      for (const pid of [process.ppid, process.pid]) if (procs.includes(pid)) moveInto(dirname(dir), pid);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EACCES") return undefined;
      return `cannot leave the task forker's cgroup ${dir}: ${messageOf(error)}`;
    }
  }
  const left = removeCgroupTree(dir);
  return left.length > 0 ? `cannot remove cgroup ${left.join(", ")}` : undefined;
}
