import { lstatSync } from "node:fs";
import { join } from "node:path";
import { type NodeConf, type PullProgress, type StepRecord, jobrtError } from "@jobrt/core";
import type { Mount, OciConfig } from "../bundle.js";
import type { CachedImage } from "@jobrt/images";

/**
 * @jobrt/images, loaded by the first call that needs it: a step from a bundle dir never does, and
 * loading it was a tenth of what runtime-oci added to a step under srun (docs/performance.md).
 */
export function imagesModule(): Promise<typeof import("@jobrt/images")> {
  return import("@jobrt/images");
}

const WHO = "runtime oci";

/** Setup's image work: the cached bundle this step runs from (pulled and unpacked if needed). */
export async function setupImage(
  node: NodeConf,
  step: StepRecord,
  text: string,
  progress?: (p: PullProgress) => void,
): Promise<CachedImage> {
  return (await imagesModule()).acquireStepImage(node, step, text, WHO, progress);
}

/** The submit-context check: the reference parses and names an image the user can pull. */
export async function validateImage(node: NodeConf, step: StepRecord, text: string): Promise<void> {
  const { loadImageSettings, parseImageReference, resolveForStep } = await imagesModule();
  const ref = parseImageReference(text);
  const r = await resolveForStep(step, loadImageSettings(node.confDir), ref);
  node.log("info", `runtime oci: ${ref.text} is ${r.digest}${r.public ? " (public)" : ""}`);
}

/**
 * Cleanup's image work: give back the image under this process's in-use mark (the one setup's
 * acquire left) and this process's share of the step's pin.
 */
export async function releaseImageOfStep(
  node: NodeConf,
  step: StepRecord,
  image: Omit<CachedImage, "mark"> | undefined,
): Promise<void> {
  const { markName, releaseStepImage } = await imagesModule();
  const held = image ? { ...image, mark: markName(step.jobId, step.stepId) } : undefined;
  return releaseStepImage(node, step, held, WHO);
}

/** The task's process.args: the image's Entrypoint (kept in the cached config.json), then the task argv. */
export function imageArgs(config: OciConfig, argv: string[]): string[] {
  const proc = config.process as { args?: unknown } | undefined;
  const entrypoint = Array.isArray(proc?.args) ? (proc.args as string[]) : [];
  return [...entrypoint, ...argv];
}

/** Fits the cached config to this step's user; logs what could not be honoured. */
export async function fitImageToStep(node: NodeConf, config: OciConfig, uid: number): Promise<void> {
  const note = (await imagesModule()).fitImageUser(config, uid);
  if (note) node.log("verbose", `runtime oci: ${note}`);
}

/**
 * Can a mount land at `destination` without changing the shared rootfs? runc creates a missing
 * mount point inside the rootfs on the host (as root it would add it to the image every user
 * shares; rootless it cannot), so the point must exist in the image, or lie under its /tmp, which
 * is a private tmpfs in every container.
 */
export function imageHasMountPoint(rootfs: string, destination: string): boolean {
  const parts = destination.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) return false;
  if (parts[0] === "tmp" && parts.length > 1) return isRealDir(join(rootfs, "tmp"));
  try {
    return !lstatSync(join(rootfs, ...parts)).isSymbolicLink();
  } catch {
    return false;
  }
}

function isRealDir(p: string): boolean {
  try {
    return lstatSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** --container-volume targets of an image step must be mount points the image has (see above). */
export function checkImageVolumes(rootfs: string, mounts: Mount[]): void {
  for (const m of mounts) {
    if (imageHasMountPoint(rootfs, m.destination)) continue;
    throw jobrtError(
      "ERR_CONTAINER_REQUEST",
      {
        problem: `--container-volume ${m.source}:${m.destination}: ${m.destination} does not exist in the image, whose root filesystem is shared and read-only; mount on a path the image has, or under /tmp`,
      },
      { details: { runtime: "runtime/oci", key: "--container-volume" } },
    );
  }
}
