import { join } from "node:path";
import type { NodeConf, StepRecord } from "@jobrt/core";
import { joinStepShare, leaveStepShare, publishStepShare, readStepShare } from "@jobrt/host-services";
import type { PinnedImage } from "./exec.js";
import { HEX64_RE } from "./image.js";

/**
 * The image a step was pinned to, shared through SpoolDir by every process of the step on this
 * node. Under `srun ... jobrt exec` each task is its own jobrt process with its own setup; the
 * first one to resolve the image writes the pin and the others use it, so a tag re-pulled
 * meanwhile cannot give one task another image. Each process marks its own tasks; whoever removes
 * the last mark removes the pin and the directory. Best effort: when SpoolDir is missing or not
 * ours, each process resolves for itself (which is what plain `srun shifter` does). The sharing is
 * host-services' step-shared value.
 */
export function pinDir(node: NodeConf, step: StepRecord): string {
  const het = step.het ? `.${step.het.component}` : "";
  return join(node.spoolDir, `shifter-${step.jobId}.${step.stepId}${het}`);
}

const PIN = "image";

function share(node: NodeConf, step: StepRecord) {
  const log = (level: "warn" | "verbose", message: string) => node.log(level, `shifter: ${message}`);
  return { dir: pinDir(node, step), taskIds: step.tasks.map((t) => t.localId), log };
}

/** Creates the step's pin directory and this process's task marks; undefined when sharing is off. */
export function joinPinDir(node: NodeConf, step: StepRecord): string | undefined {
  return joinStepShare(share(node, step));
}

/** The pin another process of this step wrote for the same request, if any. */
export function readPin(dir: string, request: string): PinnedImage | undefined {
  try {
    const pin = JSON.parse(readStepShare(dir, PIN) ?? "") as Partial<PinnedImage>;
    if (pin.request !== request) return undefined;
    if (pin.type === "id" && typeof pin.value === "string" && HEX64_RE.test(pin.value))
      return { type: "id", value: pin.value, request };
  } catch {
    // no pin yet, or a torn one: resolve ourselves
  }
  return undefined;
}

/** Publishes our pin unless another process got there first; returns the pin every task must use. */
export function writePin(dir: string, pinned: PinnedImage): PinnedImage {
  return publishStepShare(dir, PIN, `${JSON.stringify(pinned)}\n`) === "taken"
    ? (readPin(dir, pinned.request) ?? pinned)
    : pinned;
}

/** Removes this process's marks; the last one out removes the pin and the directory. Never throws. */
export function leavePinDir(node: NodeConf, step: StepRecord): void {
  leaveStepShare(share(node, step));
}
