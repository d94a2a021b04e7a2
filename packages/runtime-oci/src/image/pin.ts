import { closeSync, linkSync, lstatSync, mkdirSync, openSync, readFileSync, readdirSync, rmdirSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type NodeConf, type StepRecord, messageOf } from "@jobrt/core";
import { DIGEST_RE, type ResolvedImage } from "@jobrt/images";

/**
 * The digest a step's image reference was pinned to, shared through SpoolDir by every jobrt
 * process of the step on this node (as runtime-shifter pins its image ids). Under `srun ... jobrt
 * exec` each task is its own jobrt with its own setup: the first to resolve the tag writes the pin,
 * the others use it, so a tag moved meanwhile cannot give one task another image. Each process
 * marks its own tasks; whoever removes the last mark removes the pin. Best effort: when SpoolDir
 * is not usable, each process resolves for itself.
 */
export interface Pin extends ResolvedImage {
  request: string;
}

export function pinDir(node: NodeConf, step: StepRecord): string {
  const het = step.het ? `.${step.het.component}` : "";
  return join(node.spoolDir, `oci-image-${step.jobId}.${step.stepId}${het}`);
}

const PIN = "pin";
const mark = (localId: number) => `task.${localId}`;

function usableDir(dir: string): boolean {
  const st = lstatSync(dir);
  return st.isDirectory() && st.uid === process.geteuid?.() && (st.mode & 0o077) === 0;
}

/** Creates the step's pin dir and this process's task marks; undefined when sharing is off. */
export function joinPin(node: NodeConf, step: StepRecord): string | undefined {
  const dir = pinDir(node, step);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      mkdirSync(node.spoolDir, { recursive: true, mode: 0o755 });
      try {
        mkdirSync(dir, { mode: 0o700 });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
      if (!usableDir(dir)) {
        node.log("warn", `runtime oci: ${dir} is not a private directory of this user; not sharing the image pin`);
        return undefined;
      }
      for (const t of step.tasks) closeSync(openSync(join(dir, mark(t.localId)), "w", 0o600));
      return dir;
    } catch (error) {
      // The step's last process removed the dir between our mkdir and our marks: make it again.
      if ((error as NodeJS.ErrnoException).code === "ENOENT" && attempt < 2) continue;
      node.log("verbose", `runtime oci: not sharing the image pin through ${dir}: ${messageOf(error)}`);
      return undefined;
    }
  }
  return undefined;
}

/** The pin another process of this step wrote for the same reference, if any. */
export function readPin(dir: string, request: string): Pin | undefined {
  try {
    const pin = JSON.parse(readFileSync(join(dir, PIN), "utf8")) as Partial<Pin>;
    if (pin.request === request && typeof pin.digest === "string" && DIGEST_RE.test(pin.digest)) return { request, digest: pin.digest, public: pin.public === true };
  } catch {
    // no pin yet, or a torn one
  }
  return undefined;
}

/** Publishes our pin unless another process got there first; returns the pin every task must use. */
export function writePin(dir: string, pin: Pin): Pin {
  const tmp = join(dir, `${PIN}.${process.pid}.tmp`);
  try {
    writeFileSync(tmp, `${JSON.stringify(pin)}\n`, { mode: 0o600 });
    linkSync(tmp, join(dir, PIN));
    return pin;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return readPin(dir, pin.request) ?? pin;
    return pin;
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // never written
    }
  }
}

/** Removes this process's marks; the last one out removes the pin and the dir. Never throws. */
export function leavePin(node: NodeConf, step: StepRecord): void {
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
    if (code !== "ENOENT" && code !== "ENOTEMPTY") node.log("warn", `runtime oci: could not remove ${dir}: ${messageOf(error)}`);
  }
}
