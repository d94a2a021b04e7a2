import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { jobrtError, messageOf } from "@jobrt/core";
import { procCgroups } from "@jobrt/host-services";
import {
  type CgroupHierarchy,
  cgroupExists,
  findHierarchy,
  moveInto,
  ownDir,
  populated,
  procsOf,
  removeCgroupTree,
  subtree,
} from "./cgroupfs.js";

/** jobrt.conf ProcTrack: how the processes of a step are found and killed (docs/reliability.md). */
export type ProcTrackMode = "auto" | "cgroup" | "cgroup2" | "cgroup1" | "pgid";
export type ProcTrackKind = "cgroup2" | "cgroup1" | "pgid";
export const PROCTRACK_MODES: readonly ProcTrackMode[] = ["auto", "cgroup", "cgroup2", "cgroup1", "pgid"];

/** What the journal keeps so that `jobrt gc` can kill and remove a dead step's cgroup. */
export interface TrackerRecord {
  kind: ProcTrackKind;
  /** The step's cgroup directory (cgroup kinds). */
  path?: string;
  /** Why a cgroup could not be used (pgid under ProcTrack=auto). */
  fallback?: string;
  /** The task forker's own v1 freezer cgroup (forkercgroup.ts), whatever `kind` is. */
  forker?: string;
}

/**
 * Owns every process a step starts. With a cgroup, a task and everything it forks (a `setsid`
 * daemon, a double fork) is in the task's cgroup below the step's, so nothing escapes; with
 * process groups only the task's own group is known.
 */
export interface ProcessTracker {
  readonly record: TrackerRecord;
  /** Runs `start`, which starts processes synchronously, so that they begin inside task `taskId`. */
  startInside<T>(taskId: number, start: () => T): T;
  /** The cgroup.procs file a process of task `taskId` joins before it execs (undefined: no cgroup). */
  taskCgroup(taskId: number): string | undefined;
  /** SIGKILLs every process of one task (its group, or its cgroup). */
  killTask(taskId: number, leaderPid: number | undefined): void;
  /** SIGKILLs every process of the step. */
  killAll(): void;
  /** How many tasks still have a live process in the step (known with a cgroup only; else 0). */
  busyTasks(): number;
  /** Resolves true once no live process of the step is left, false after `ms`. */
  waitEmpty(ms: number): Promise<boolean>;
  /** Removes the step's cgroups; returns what could not be removed. */
  release(): string[];
}

function killPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function pollUntil(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() >= end) return false;
    await sleep(10);
  }
  return true;
}

/** Process groups only: what is left when no cgroup can be used. */
class GroupTracker implements ProcessTracker {
  readonly record: TrackerRecord;
  readonly #leaders = new Set<number>();

  constructor(fallback?: string) {
    this.record = { kind: "pgid", ...(fallback ? { fallback } : {}) };
  }

  startInside<T>(_taskId: number, start: () => T): T {
    return start();
  }

  taskCgroup(_taskId: number): undefined {
    return undefined;
  }

  killTask(_taskId: number, leaderPid: number | undefined): void {
    if (leaderPid === undefined) return;
    this.#leaders.add(leaderPid);
    killPid(-leaderPid, "SIGKILL");
  }

  killAll(): void {
    for (const pgid of this.#leaders) killPid(-pgid, "SIGKILL");
  }

  busyTasks(): number {
    return 0;
  }

  waitEmpty(ms: number): Promise<boolean> {
    return pollUntil(() => [...this.#leaders].every((g) => !groupExists(g)), ms);
  }

  release(): string[] {
    return [];
  }
}

function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A cgroup per step with a cgroup per task below it, in the cgroup2 mount or the v1 freezer. */
class CgroupTracker implements ProcessTracker {
  readonly record: TrackerRecord;

  constructor(
    readonly hierarchy: CgroupHierarchy,
    readonly dir: string,
  ) {
    this.record = { kind: hierarchy.version === 2 ? "cgroup2" : "cgroup1", path: dir };
  }

  // Template strings, not path.join (which rebuilds its result a character at a time): these run
  // at every task's start and end, and this.dir is already an absolute, normalised path.
  #taskDir(taskId: number): string {
    return `${this.dir}/task_${taskId}`;
  }

  taskCgroup(taskId: number): string {
    const dir = this.#taskDir(taskId);
    if (!cgroupExists(dir)) mkdirSync(dir);
    return `${dir}/cgroup.procs`;
  }

  startInside<T>(taskId: number, start: () => T): T {
    const procs = this.taskCgroup(taskId);
    // Children are born in the cgroup of the process that forks them: jobrt steps in for the
    // synchronous spawn, so no task can fork before it is tracked (no race, no wrapper process).
    writeFileSync(procs, `${process.pid}\n`);
    try {
      return start();
    } finally {
      this.#leave();
    }
  }

  #leave(): void {
    try {
      moveInto(ownDir(this.hierarchy), process.pid);
    } catch (error) {
      throw jobrtError("ERR_LAUNCH", { problem: `cannot leave the step's cgroup ${this.dir}: ${messageOf(error)}` });
    }
  }

  /** jobrt must never be inside what it kills. */
  #assertOutside(): void {
    // Unreadable counts as inside: leaving is harmless, killing itself is not.
    const own = procCgroups();
    const inner = this.dir.slice(this.hierarchy.mount.length);
    if (own.length === 0 || own.some((m) => m.path.includes(inner))) this.#leave();
  }

  killTask(taskId: number, leaderPid: number | undefined): void {
    if (leaderPid !== undefined) killPid(-leaderPid, "SIGKILL");
    this.#assertOutside();
    killCgroup(this.hierarchy, this.#taskDir(taskId));
  }

  killAll(): void {
    this.#assertOutside();
    killCgroup(this.hierarchy, this.dir);
  }

  busyTasks(): number {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(this.dir).filter((n) => n.startsWith("task_"));
    } catch {
      return 0;
    }
    return tasks.filter((t) => populated(this.hierarchy, join(this.dir, t))).length;
  }

  waitEmpty(ms: number): Promise<boolean> {
    return pollUntil(() => !populated(this.hierarchy, this.dir), ms);
  }

  release(): string[] {
    return removeCgroupTree(this.dir);
  }
}

/**
 * SIGKILLs every process in the cgroup at `dir` and below: cgroup v2 writes cgroup.kill; v1 freezes
 * the cgroup first so that no process can fork while the members are listed and killed.
 */
export function killCgroup(h: CgroupHierarchy, dir: string): void {
  if (!cgroupExists(dir)) return;
  if (h.version === 2) {
    writeFileSync(`${dir}/cgroup.kill`, "1\n");
    return;
  }
  const state = join(dir, "freezer.state");
  try {
    writeFileSync(state, "FROZEN\n");
    const end = Date.now() + 1000;
    while (readFileSync(state, "utf8").trim() !== "FROZEN" && Date.now() < end) {
      // FREEZING: a member is in an uninterruptible sleep; SIGKILL is queued either way.
    }
    for (const d of subtree(dir)) for (const pid of procsOf(d)) killPid(pid, "SIGKILL");
  } finally {
    writeFileSync(state, "THAWED\n");
  }
}

/** A tracker for a dead step's journaled record (`jobrt gc`): kill, wait and remove. */
export function trackerFromRecord(record: TrackerRecord): ProcessTracker | undefined {
  if (record.kind === "pgid" || !record.path) return undefined;
  const h = findHierarchy(record.kind === "cgroup2" ? 2 : 1);
  if (!h || !record.path.startsWith(`${h.mount}/`)) return undefined;
  return new CgroupTracker(h, record.path);
}

/** Tries one cgroup version: the step's cgroup is made below jobrt's own cgroup. */
function tryCgroup(
  version: 1 | 2,
  name: string,
  beforeCreate?: (record: TrackerRecord) => void,
): CgroupTracker | string {
  const h = findHierarchy(version);
  if (!h) return version === 2 ? "no cgroup2 mount" : "no cgroup v1 freezer mount";
  const dir = join(ownDir(h), name);
  // Journaled before it exists, so a jobrt killed at any later moment leaves a cgroup gc finds
  // (docs/reliability.md, "Process tracking"); a path that was never made costs gc nothing.
  beforeCreate?.({ kind: version === 2 ? "cgroup2" : "cgroup1", path: dir });
  try {
    mkdirSync(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "EEXIST") return `cannot create ${dir}: ${code ?? messageOf(error)}`;
    // A step of this name is running or its host died: never adopt its processes.
    return `${dir} already exists`;
  }
  if (version === 2 && !existsSync(join(dir, "cgroup.kill"))) {
    removeCgroupTree(dir);
    return "the kernel's cgroup2 has no cgroup.kill (Linux 5.14 or later)";
  }
  return new CgroupTracker(h, dir);
}

/**
 * The tracker for a new step named `name` (unique on this node while the step lives): `auto`
 * takes cgroup2, else the v1 freezer, else process groups, saying why in `record.fallback`;
 * an explicit mode fails with one line when it cannot be had. `beforeCreate` gets each cgroup's
 * record before the cgroup is made (the step journals it).
 */
export function createTracker(
  mode: ProcTrackMode,
  name: string,
  beforeCreate?: (record: TrackerRecord) => void,
): ProcessTracker {
  if (mode === "pgid") return new GroupTracker();
  const versions: (1 | 2)[] = mode === "cgroup2" ? [2] : mode === "cgroup1" ? [1] : [2, 1];
  const why: string[] = [];
  for (const version of versions) {
    const result = tryCgroup(version, `jobrt-${name}`, beforeCreate);
    if (typeof result !== "string") return result;
    why.push(`cgroup${version}: ${result}`);
  }
  if (mode !== "auto")
    throw jobrtError("ERR_LAUNCH", {
      problem: `ProcTrack=${mode}: ${why.join("; ")} (set ProcTrack=auto or pgid in jobrt.conf)`,
    });
  return new GroupTracker(why.join("; "));
}

/** What `createTracker(mode)` would give, without keeping anything (`jobrt runtimes`). */
export function probeTracker(mode: ProcTrackMode): TrackerRecord {
  try {
    const tracker = createTracker(mode, `probe.${process.pid}`);
    tracker.release();
    return tracker.record;
  } catch (error) {
    return { kind: "pgid", fallback: messageOf(error) };
  }
}
