import { type CgroupLeft, findContainerCgroups, hostCgroupDirs, removeCgroups } from "./cgroups.js";
import { containerIds } from "./containerid.js";
import type { FileUser } from "@jobrt/host-services";
import type { PatternValues } from "./pattern.js";

export interface CutShortTask {
  /** The command that was (or may have been) cut short. */
  key: "RunTimeCreate" | "RunTimeRun";
  /** The task's RunTimeCreate (or RunTimeRun), RunTimeQuery and RunTimeDelete patterns. */
  patterns: (string | undefined)[];
  values: PatternValues;
  /** config.json's linux.cgroupsPath, when the task's config came from the bundle. */
  cgroupsPath: unknown;
  /** The host's own cgroup dirs, as setup recorded them (undefined in an older step state). */
  hostCgroups: readonly string[] | undefined;
  /** Who ran the runtime: its dirs belong to that uid, and are removed as `identity`. */
  uid: number;
  identity: FileUser | undefined;
  /** `jobrt gc` after a crash: its step is kept, so the next gc tries again. */
  afterCrash: boolean;
  log: (level: "verbose" | "debug" | "warn", message: string) => void;
  /**
   * Set when nothing but the dirs themselves shows that the command was cut short (run mode;
   * the caller has run RunTimeDelete for the runtime's own state already).
   */
  uncertain?: boolean;
}

function describe(left: CgroupLeft): string {
  return left.pids.length > 0 ? `${left.dir} (pids ${left.pids.join(" ")})` : `${left.dir} (${left.error})`;
}

/**
 * After a create that was cut short (and its RunTimeDelete): removes the cgroup dirs the runtime
 * made for the task's container, found by the container id its commands name (containerid.ts).
 * Returns one line naming the dirs that could not be removed and what to do, or undefined.
 * config.json's own cgroupsPath is the same for every container of the bundle, so dirs there may
 * be another container's: they are named in a warning, never removed. A systemd cgroupsPath
 * (`slice:prefix:name`) is a transient unit that systemd removes when its processes are gone.
 */
export async function cutShortCgroups(t: CutShortTask): Promise<string | undefined> {
  const recorded = t.hostCgroups ?? hostCgroupDirs();
  if (typeof t.cgroupsPath === "string" && t.cgroupsPath !== "") {
    const path = t.cgroupsPath;
    // Without a known cut-short command, a dir there is most likely another container's.
    if (path.includes(":") || t.uncertain) return undefined;
    const found = findContainerCgroups(
      path.startsWith("/") ? { absolute: [path] } : { relative: [path] },
      recorded,
      t.uid,
    );
    if (found.length > 0) {
      t.log(
        "warn",
        `config.json's linux.cgroupsPath ${JSON.stringify(path)} is shared by every container of the bundle, so its cgroup dirs are left: ${found.join(", ")} (rmdir them once no container of the bundle runs)`,
      );
    }
    return undefined;
  }
  const ids = containerIds(t.patterns, t.values);
  if (ids.length === 0) {
    t.log(
      "verbose",
      "no container id found in RunTimeCreate/RunTimeQuery/RunTimeDelete: the runtime's cgroup dirs are not looked for",
    );
    return undefined;
  }
  const found = findContainerCgroups({ relative: ids }, recorded, t.uid);
  t.log("debug", `cgroup dirs of container ${ids.join(", ")}: ${found.join(", ") || "none"}`);
  if (found.length > 0 && t.uncertain)
    t.log("verbose", `${t.key} was cut short (its container's cgroup dirs are left, the runtime knows no container)`);
  const left = await removeCgroups(found, t.identity);
  if (left.length === 0) return undefined;
  // Only gc keeps the step for another try; after a run nothing else will come back for the dirs.
  const then = t.afterCrash ? "run `jobrt gc` again to remove the dirs" : "remove the dirs with rmdir";
  return `${t.key} was cut short and the cgroup dirs of container ${ids.join(", ")} still hold processes: ${left.map(describe).join(", ")}; end those processes, then ${then}`;
}
