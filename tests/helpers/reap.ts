import { readFileSync, readdirSync, rmdirSync } from "node:fs";
import { join } from "node:path";

/** A live process (not a zombie) found by the environment it was started with. */
export interface Straggler {
  pid: number;
  ppid: number;
  comm: string;
  /** The jobrt step cgroups (cgroup2 and v1 freezer) it is in, as paths in the cgroup mounts. */
  cgroups: string[];
}

/**
 * Processes started with `name=value` in their environment, other than this one: a test's
 * processes inherit the variable from the test, so a step's tasks and supervisors that outlive the
 * test carry it (/proc/PID/environ is the environment at exec, which later changes cannot hide).
 */
export function processesWithEnv(name: string, value: string): Straggler[] {
  const needle = `\0${name}=${value}\0`;
  const mounts = cgroupMounts();
  const found: Straggler[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      if (/^State:\s+Z/m.test(status)) continue;
      if (!`\0${readFileSync(`/proc/${pid}/environ`, "utf8")}`.includes(needle)) continue;
      found.push({
        pid,
        ppid: Number(/^PPid:\s+(\d+)/m.exec(status)?.[1]),
        comm: /^Name:\s+(.*)$/m.exec(status)?.[1] ?? "?",
        cgroups: stepCgroups(readFileSync(`/proc/${pid}/cgroup`, "utf8"), mounts),
      });
    } catch {
      // gone meanwhile, or a kernel thread
    }
  }
  return found;
}

/**
 * Ends what processesWithEnv finds and is still there after a 3 s grace (a test's own cleanup may
 * just have told it to go, e.g. closed a lock holder's stdin, which needs this event loop to run):
 * SIGKILL, wait (at most 5 s) for them to go, then remove the jobrt step cgroups they were in (a
 * killed `jobrt run` cannot). Returns one line per process, empty when there were none; `spare`
 * excludes processes (e.g. vitest's own workers).
 */
export async function reap(
  name: string,
  value: string,
  spare: (p: Straggler) => boolean = () => false,
): Promise<string[]> {
  const end = Date.now() + 3_000;
  let found = processesWithEnv(name, value).filter((p) => !spare(p));
  while (found.length > 0 && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 50));
    found = processesWithEnv(name, value).filter((p) => !spare(p));
  }
  return kill(name, value, found);
}

/** reap() without the grace and without the event loop: for an exit handler (an interrupted run). */
export function reapNow(name: string, value: string, spare: (p: Straggler) => boolean = () => false): string[] {
  return kill(
    name,
    value,
    processesWithEnv(name, value).filter((p) => !spare(p)),
  );
}

function kill(name: string, value: string, found: Straggler[]): string[] {
  for (const p of found) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  const pids = new Set(found.map((p) => p.pid));
  const end = Date.now() + 5_000;
  const nap = new Int32Array(new SharedArrayBuffer(4));
  while (processesWithEnv(name, value).some((p) => pids.has(p.pid)) && Date.now() < end) Atomics.wait(nap, 0, 0, 50);
  const busy = [...new Set(found.flatMap((p) => p.cgroups))].filter((dir) => !removeCgroup(dir));
  return [
    ...found.map(
      (p) =>
        `pid ${p.pid} (${p.comm}, parent ${p.ppid}${p.cgroups.length > 0 ? `, cgroup ${p.cgroups.join(" ")}` : ""}): killed`,
    ),
    ...busy.map((dir) => `cgroup ${dir}: still in use, left in place`),
  ];
}

/** The cgroup2 mount and the v1 freezer mount (/proc/self/mountinfo). */
function cgroupMounts(): { v2?: string; freezer?: string } {
  const found: { v2?: string; freezer?: string } = {};
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const [left, right] = line.split(" - ");
    const mountPoint = left?.split(" ")[4];
    const [fstype, , options] = right?.split(" ") ?? [];
    if (!mountPoint) continue;
    if (fstype === "cgroup2") found.v2 ??= mountPoint;
    else if (fstype === "cgroup" && options?.split(",").includes("freezer")) found.freezer ??= mountPoint;
  }
  return found;
}

/** The step cgroup (the path down to its `jobrt-*` component) of each hierarchy jobrt tracks in. */
function stepCgroups(procCgroup: string, mounts: { v2?: string; freezer?: string }): string[] {
  const dirs: string[] = [];
  for (const line of procCgroup.split("\n")) {
    const [id, controllers, path] = line.split(":");
    const mount =
      id === "0" && controllers === ""
        ? mounts.v2
        : controllers?.split(",").includes("freezer")
          ? mounts.freezer
          : undefined;
    if (!mount || !path) continue;
    const parts = path.split("/");
    const step = parts.findIndex((p) => p.startsWith("jobrt-"));
    if (step > 0) dirs.push(join(mount, ...parts.slice(0, step + 1)));
  }
  return dirs;
}

/** rmdir of a cgroup and its child cgroups, deepest first; false when one is still in use. */
function removeCgroup(dir: string): boolean {
  try {
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) removeCgroup(join(dir, e.name));
    rmdirSync(dir);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT";
  }
}
