import { closeSync, linkSync, lstatSync, mkdirSync, openSync, readFileSync, readdirSync, rmdirSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type NodeConf, type StepRecord, messageOf } from "@jobrt/core";
import type { PinnedImage } from "./exec.js";
import { HEX64_RE } from "./image.js";

/**
 * The image a step was pinned to, shared through SpoolDir by every process of the step on this
 * node. Under `srun ... jobrt exec` each task is its own jobrt process with its own setup; the
 * first one to resolve the image writes the pin and the others use it, so a tag re-pulled
 * meanwhile cannot give one task another image. Each process marks its own tasks; whoever removes
 * the last mark removes the pin and the directory. Best effort: when SpoolDir is missing or not
 * ours, each process resolves for itself (which is what plain `srun shifter` does).
 */
export function pinDir(node: NodeConf, step: StepRecord): string {
  const het = step.het ? `.${step.het.component}` : "";
  return join(node.spoolDir, `shifter-${step.jobId}.${step.stepId}${het}`);
}

const PIN = "image";
const mark = (localId: number) => `task.${localId}`;

/** Our own private directory: a real directory, owned by us, closed to everyone else. */
function usableDir(dir: string): boolean {
  const st = lstatSync(dir);
  return st.isDirectory() && st.uid === process.geteuid?.() && (st.mode & 0o077) === 0;
}

/** Creates the step's pin directory and this process's task marks; undefined when sharing is off. */
export function joinPinDir(node: NodeConf, step: StepRecord): string | undefined {
  const dir = pinDir(node, step);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      try {
        mkdirSync(dir, { mode: 0o700 });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
      if (!usableDir(dir)) {
        node.log("warn", `shifter: ${dir} is not a private directory of this user; not sharing the image pin`);
        return undefined;
      }
      for (const t of step.tasks) closeSync(openSync(join(dir, mark(t.localId)), "w", 0o600));
      return dir;
    } catch (error) {
      // ENOENT: the last process of the step removed the directory between our mkdir and our
      // marks; make it again.
      if ((error as NodeJS.ErrnoException).code === "ENOENT" && attempt < 2) continue;
      node.log("verbose", `shifter: not sharing the image pin through ${dir}: ${messageOf(error)}`);
      return undefined;
    }
  }
  return undefined;
}

/** The pin another process of this step wrote for the same request, if any. */
export function readPin(dir: string, request: string): PinnedImage | undefined {
  try {
    const pin = JSON.parse(readFileSync(join(dir, PIN), "utf8")) as Partial<PinnedImage>;
    if (pin.request !== request) return undefined;
    if (pin.type === "id" && typeof pin.value === "string" && HEX64_RE.test(pin.value)) return { type: "id", value: pin.value, request };
  } catch {
    // no pin yet, or a torn one: resolve ourselves
  }
  return undefined;
}

/** Publishes our pin unless another process got there first; returns the pin every task must use. */
export function writePin(dir: string, pinned: PinnedImage): PinnedImage {
  const tmp = join(dir, `${PIN}.${process.pid}.tmp`);
  try {
    writeFileSync(tmp, `${JSON.stringify(pinned)}\n`, { mode: 0o600 });
    linkSync(tmp, join(dir, PIN));
    return pinned;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return readPin(dir, pinned.request) ?? pinned;
    return pinned;
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // never written
    }
  }
}

/** Removes this process's marks; the last one out removes the pin and the directory. Never throws. */
export function leavePinDir(node: NodeConf, step: StepRecord): void {
  const dir = pinDir(node, step);
  try {
    if (!usableDir(dir)) return;
  } catch {
    return;
  }
  for (const t of step.tasks) {
    try {
      unlinkSync(join(dir, mark(t.localId)));
    } catch {
      // not ours or already gone
    }
  }
  try {
    if (readdirSync(dir).some((f) => f.startsWith("task."))) return;
    for (const f of readdirSync(dir)) unlinkSync(join(dir, f));
    rmdirSync(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ENOENT/ENOTEMPTY: another process of the step finished or started meanwhile.
    if (code !== "ENOENT" && code !== "ENOTEMPTY") node.log("warn", `shifter: could not remove ${dir}: ${messageOf(error)}`);
  }
}
