import { existsSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isCgroup2, procCgroups, processRunning, readMountInfo } from "@jobrt/host-services";

/** A cgroup hierarchy jobrt can track processes in: the cgroup2 mount, or the v1 freezer. */
export interface CgroupHierarchy {
  version: 1 | 2;
  /** Mount point of the hierarchy. */
  mount: string;
  /** This process's own cgroup in it, relative to the mount ("/" for the root). */
  own: string;
}

/** The cgroup2 mount and the v1 freezer mount of this mount namespace, where they exist. */
function cgroupMounts(): { v2?: string; freezer?: string } {
  const found: { v2?: string; freezer?: string } = {};
  for (const m of readMountInfo()) {
    if (m.fstype === "cgroup2") found.v2 ??= m.mountPoint;
    else if (m.fstype === "cgroup" && m.superOptions.includes("freezer")) found.freezer ??= m.mountPoint;
  }
  return found;
}

/** This process's cgroup path in the v2 hierarchy ("0::") or in the v1 freezer hierarchy. */
function ownCgroup(version: 1 | 2): string | undefined {
  const line = procCgroups().find((m) => (version === 2 ? isCgroup2(m) : m.controllers.includes("freezer")));
  return line?.path;
}

export function findHierarchy(version: 1 | 2): CgroupHierarchy | undefined {
  const mounts = cgroupMounts();
  const mount = version === 2 ? mounts.v2 : mounts.freezer;
  const own = ownCgroup(version);
  if (mount === undefined || own === undefined) return undefined;
  return { version, mount, own };
}

/** The directory of this process's own cgroup. */
export function ownDir(h: CgroupHierarchy): string {
  return join(h.mount, h.own);
}

/** Pids listed in one cgroup's cgroup.procs (not its descendants). */
export function procsOf(dir: string): number[] {
  try {
    return readFileSync(join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** `dir` and every cgroup below it, deepest first (the order rmdir needs). */
export function subtree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    let entries: import("node:fs").Dirent[] = [];
    try {
      entries = readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) if (e.isDirectory()) walk(join(d, e.name));
    out.push(d);
  };
  walk(dir);
  return out;
}

/** Moves process `pid` (all its threads) into the cgroup at `dir`. */
export function moveInto(dir: string, pid: number): void {
  writeFileSync(join(dir, "cgroup.procs"), `${pid}\n`);
}

/** True while any process (a zombie does not count) is in `dir` or below it. */
export function populated(h: CgroupHierarchy, dir: string): boolean {
  if (h.version === 2) {
    try {
      return /^populated 1$/m.test(readFileSync(join(dir, "cgroup.events"), "utf8"));
    } catch {
      return false;
    }
  }
  return subtree(dir).some((d) => procsOf(d).some(processRunning));
}

/** True when `dir` is gone (removed now, or not there). */
function rmdirGone(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT";
  }
}

/**
 * Removes `dir` and every cgroup below it; returns the ones that could not be removed, deepest
 * first. A cgroup is removed before it is listed, and listed only when that fails: most have no
 * child, and listing one reads every control file's entry (a step's 256 task cgroups hold ~40
 * each, megabytes of garbage at the end of a large step: docs/performance.md, peak RSS).
 */
export function removeCgroupTree(dir: string): string[] {
  const left: string[] = [];
  const remove = (d: string): void => {
    if (rmdirGone(d)) return;
    let children: string[] = [];
    try {
      children = readdirSync(d, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => `${d}/${e.name}`);
    } catch {
      // unreadable: it stays, and says so
    }
    for (const child of children) remove(child);
    if (children.length === 0 || !rmdirGone(d)) left.push(d);
  };
  remove(dir);
  return left;
}

export function cgroupExists(dir: string): boolean {
  // Not path.join: called for every task at its start and end, and dir is already absolute.
  return existsSync(`${dir}/cgroup.procs`);
}
