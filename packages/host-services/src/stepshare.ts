import {
  closeSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  rmdirSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { makeDirs } from "./makedir.js";
import { join } from "node:path";

/**
 * A step-shared value: one small file that every jobrt process of a step on this node sees. Under
 * `srun ... jobrt exec` each task is its own jobrt process with its own setup; the first to work a
 * value out publishes it and the others use it (runtime-oci's and runtime-shifter's image pins).
 * It lives in a private directory of the step under SpoolDir; each process marks its own tasks,
 * and whoever removes the last mark removes the directory. Best effort: when the directory is not
 * usable, each process works the value out for itself.
 */
export interface StepShareOptions {
  /** The step's directory: SpoolDir/<runtime>-<job>.<step>[.<het component>]. */
  dir: string;
  /** This process's tasks (their local ids). */
  taskIds: readonly number[];
  /** Where the why of a value not shared goes; the caller names itself in it. */
  log: (level: "warn" | "verbose", message: string) => void;
  /** Make SpoolDir (0755) when it is missing. */
  makeParent?: boolean;
}

const mark = (localId: number) => `task.${localId}`;

/** Our own private directory: a real directory, owned by us, closed to everyone else. */
function usableDir(dir: string): boolean {
  const st = lstatSync(dir);
  return st.isDirectory() && st.uid === process.geteuid?.() && (st.mode & 0o077) === 0;
}

/** Creates the step's directory and this process's task marks; undefined when sharing is off. */
export function joinStepShare(o: StepShareOptions): string | undefined {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      if (o.makeParent) makeDirs(join(o.dir, ".."), 0o755);
      try {
        mkdirSync(o.dir, { mode: 0o700 });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
      if (!usableDir(o.dir)) {
        o.log("warn", `${o.dir} is not a private directory of this user; not sharing the step-shared value`);
        return undefined;
      }
      for (const t of o.taskIds) closeSync(openSync(join(o.dir, mark(t)), "w", 0o600));
      return o.dir;
    } catch (error) {
      // The step's last process removed the dir between our mkdir and our marks: make it again.
      if ((error as NodeJS.ErrnoException).code === "ENOENT" && attempt < 2) continue;
      o.log("verbose", `not sharing the step-shared value through ${o.dir}: ${(error as Error).message}`);
      return undefined;
    }
  }
  return undefined;
}

/** The value another process of the step published as `name`, if any. */
export function readStepShare(dir: string, name: string): string | undefined {
  try {
    return readFileSync(join(dir, name), "utf8");
  } catch {
    return undefined;
  }
}

/**
 * Publishes `text` as `name` unless another process got there first (a link, so never half a
 * file): "taken" when one did (read theirs), "failed" when it could not be written at all.
 */
export function publishStepShare(dir: string, name: string, text: string): "published" | "taken" | "failed" {
  const tmp = join(dir, `${name}.${process.pid}.tmp`);
  try {
    writeFileSync(tmp, text, { mode: 0o600 });
    linkSync(tmp, join(dir, name));
    return "published";
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EEXIST" ? "taken" : "failed";
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // never written
    }
  }
}

/** Removes this process's marks; the last one out removes the values and the dir. Never throws. */
export function leaveStepShare(o: Omit<StepShareOptions, "makeParent">): void {
  try {
    if (!usableDir(o.dir)) return;
  } catch {
    return;
  }
  for (const t of o.taskIds) {
    try {
      unlinkSync(join(o.dir, mark(t)));
    } catch {
      // not ours or already gone
    }
  }
  try {
    if (readdirSync(o.dir).some((f) => f.startsWith("task."))) return;
    for (const f of readdirSync(o.dir)) unlinkSync(join(o.dir, f));
    rmdirSync(o.dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ENOENT/ENOTEMPTY: another process of the step finished or started meanwhile.
    if (code !== "ENOENT" && code !== "ENOTEMPTY")
      o.log("warn", `could not remove ${o.dir}: ${(error as Error).message}`);
  }
}
