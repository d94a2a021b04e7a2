import { join } from "node:path";
import { type NodeConf, type PullProgress, type StepRecord, messageOf } from "@jobrt/core";
import { acquireImage, resolveForJob } from "./acquire.js";
import { type CachedImage, evictImages, pullAs, releaseImage } from "./cache.js";
import { type ImageReference, parseImageReference } from "./reference.js";
import type { ResolvedImage } from "./resolve.js";
import { type ImageSettings, loadImageSettings } from "./settings.js";
import { checkTrust } from "./trust.js";
import { joinPin, leavePin, readPin, writePin } from "./steppin.js";

/**
 * A step's image, ready to run from: the host service any runtime that takes `--container-image`
 * uses (docs/images.md, "Images for any runtime"), so every runtime runs one reference the same
 * way: one digest per step on a node (the pin) and per job across nodes (the store), one cached
 * or squashfs-mounted root filesystem, given back with releaseStepImage at cleanup.
 */
export interface StepImage extends CachedImage {
  /** The read-only root filesystem to start the task in (`bundle`/rootfs). */
  rootfs: string;
  /** The image's OCI runtime config (`bundle`/config.json): its env, entrypoint, workdir, user. */
  config: string;
}

/**
 * Resolves and acquires the step's image (pulled and unpacked or mounted if needed). `who` starts
 * each log line (`runtime oci`), as the caller is the one the user asked for.
 */
export async function acquireStepImage(
  node: NodeConf,
  step: StepRecord,
  text: string,
  who: string,
  progress?: (p: PullProgress) => void,
): Promise<StepImage> {
  const ref = parseImageReference(text);
  const settings = loadImageSettings(node.confDir);
  const shared = joinPin(node, step, who);
  let image: CachedImage;
  try {
    let pin = shared ? readPin(shared, ref.text) : undefined;
    if (pin) node.log("verbose", `${who}: using the image digest pinned by another process of this step (${shared})`);
    if (!pin) {
      pin = { request: ref.text, ...(await resolveForJob(node, step, settings, ref)) };
      if (shared) pin = writePin(shared, pin);
    }
    // Whatever the digest came from (this resolution, the step's or the job's pin, the shared
    // store), the policy is asked now, before anything is pulled, mounted or started: an image
    // pinned or stored under a looser policy is not run under a stricter one.
    node.log("verbose", `${who}: image ${ref.text}: ${await checkImageTrust(step, settings, ref, pin)}`);
    image = await acquireImage(node, step, settings, ref, pin, progress);
  } catch (error) {
    leavePin(node, step, who);
    throw error;
  }
  if (!image.cached && image.mountedIn === undefined) {
    await evictImages(settings, image.bundle, (m) => node.log("verbose", `${who}: ${m}`)).catch((error: unknown) =>
      node.log("warn", `${who}: image cache eviction failed: ${messageOf(error)}`),
    );
  }
  return { ...image, rootfs: join(image.bundle, "rootfs"), config: join(image.bundle, "config.json") };
}

/**
 * Whether the site's trust policy accepts the step's image (trust.ts), checked as whoever pulls
 * it; what accepted it, else ERR_IMAGE_UNTRUSTED.
 */
export function checkImageTrust(
  step: StepRecord,
  settings: ImageSettings,
  ref: ImageReference,
  resolved: ResolvedImage,
): Promise<string> {
  return checkTrust(ref, resolved.digest, settings, pullAs(step, settings, ref, resolved));
}

/** Cleanup's image work: gives back the image and this process's share of the step's pin. */
export async function releaseStepImage(
  node: NodeConf,
  step: StepRecord,
  image: CachedImage | undefined,
  who: string,
): Promise<void> {
  if (image) await releaseImage(image, (m) => node.log("warn", `${who}: ${m}`));
  leavePin(node, step, who);
}
