import { join } from "node:path";
import type { NodeConf, StepRecord } from "@jobrt/core";
import { joinStepShare, leaveStepShare, publishStepShare, readStepShare } from "@jobrt/host-services";
import { DIGEST_RE } from "./reference.js";
import type { ResolvedImage } from "./resolve.js";

/**
 * The digest a step's image reference was pinned to, shared through SpoolDir by every jobrt
 * process of the step on this node (as runtime-shifter pins its image ids). Under `srun ... jobrt
 * exec` each task is its own jobrt with its own setup: the first to resolve the tag writes the pin,
 * the others use it, so a tag moved meanwhile cannot give one task another image. Each process
 * marks its own tasks; whoever removes the last mark removes the pin. Best effort: when SpoolDir
 * is not usable, each process resolves for itself. The sharing is host-services' step-shared value.
 */
interface Pin extends ResolvedImage {
  request: string;
}

/** The name predates the host service (docs/images.md) and is kept: a step an older jobrt journaled finds its pin. */
function pinDir(node: NodeConf, step: StepRecord): string {
  const het = step.het ? `.${step.het.component}` : "";
  return join(node.spoolDir, `oci-image-${step.jobId}.${step.stepId}${het}`);
}

const PIN = "pin";

function share(node: NodeConf, step: StepRecord, who: string) {
  const log = (level: "warn" | "verbose", message: string) => node.log(level, `${who}: ${message}`);
  return { dir: pinDir(node, step), taskIds: step.tasks.map((t) => t.localId), log };
}

/** Creates the step's pin dir and this process's task marks; undefined when sharing is off. */
export function joinPin(node: NodeConf, step: StepRecord, who: string): string | undefined {
  return joinStepShare({ ...share(node, step, who), makeParent: true });
}

/** The pin another process of this step wrote for the same reference, if any. */
export function readPin(dir: string, request: string): Pin | undefined {
  try {
    const pin = JSON.parse(readStepShare(dir, PIN) ?? "") as Partial<Pin>;
    if (pin.request === request && typeof pin.digest === "string" && DIGEST_RE.test(pin.digest))
      return { request, digest: pin.digest, public: pin.public === true };
  } catch {
    // no pin yet, or a torn one
  }
  return undefined;
}

/** Publishes our pin unless another process got there first; returns the pin every task must use. */
export function writePin(dir: string, pin: Pin): Pin {
  return publishStepShare(dir, PIN, `${JSON.stringify(pin)}\n`) === "taken" ? (readPin(dir, pin.request) ?? pin) : pin;
}

/** Removes this process's marks; the last one out removes the pin and the dir. Never throws. */
export function leavePin(node: NodeConf, step: StepRecord, who: string): void {
  leaveStepShare(share(node, step, who));
}
