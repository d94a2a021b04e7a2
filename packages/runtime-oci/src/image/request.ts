import { type ContainerRequest, JobrtError, type NodeConf, type StepRecord, messageOf } from "@jobrt/core";
import type { OciConfig } from "../bundle.js";
import { type CachedImage, ensureImage, evictImages, releaseImage } from "./cache.js";
import { fitImageUser } from "./image-config.js";
import { parseImageReference } from "./reference.js";
import { resolveImage } from "./resolve.js";
import { loadImageSettings } from "./settings.js";

/** `--container-image REF` travels in the request's options (it is `--container-opt image=REF`). */
export const IMAGE_OPTION = "image";

/** The step's image reference, if it asked for one. */
export function imageOption(c: ContainerRequest): string | undefined {
  const v = c.options[IMAGE_OPTION];
  if (v === undefined || v.length === 0) return undefined;
  if (v.length > 1 || v[0] === "") {
    throw new JobrtError("ERR_CONTAINER_REQUEST", v.length > 1 ? "--container-image given twice" : "--container-image: empty value", { details: { runtime: "runtime/oci", key: "--container-image" } });
  }
  return v[0];
}

/** Setup's image work: the cached bundle this step runs from (pulled and unpacked if needed). */
export async function setupImage(node: NodeConf, step: StepRecord, text: string): Promise<CachedImage> {
  const ref = parseImageReference(text);
  const settings = loadImageSettings(node.confDir);
  const image = await ensureImage(node, step, settings, ref);
  if (!image.cached) {
    await evictImages(settings, image.bundle, (m) => node.log("verbose", `runtime oci: ${m}`)).catch((error: unknown) =>
      node.log("warn", `runtime oci: image cache eviction failed: ${messageOf(error)}`),
    );
  }
  return image;
}

/** The submit-context check: the reference parses and names an image the user can pull. */
export async function validateImage(node: NodeConf, step: StepRecord, text: string): Promise<void> {
  const ref = parseImageReference(text);
  const settings = loadImageSettings(node.confDir);
  const asUser = (process.getuid?.() ?? -1) === 0 && step.uid !== 0 ? { uid: step.uid, gid: step.gid } : {};
  const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: step.home, USER: step.user };
  for (const n of ["REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR", "DOCKER_CONFIG", "CONTAINERS_REGISTRIES_CONF"]) if (step.env[n] !== undefined) env[n] = step.env[n] as string;
  const r = await resolveImage(ref, settings, { env, ...asUser });
  node.log("info", `runtime oci: ${ref.text} is ${r.digest}${r.public ? " (public)" : ""}`);
}

/** The task's process.args: the image's Entrypoint (kept in the cached config.json), then the task argv. */
export function imageArgs(config: OciConfig, argv: string[]): string[] {
  const proc = config.process as { args?: unknown } | undefined;
  const entrypoint = Array.isArray(proc?.args) ? (proc.args as string[]) : [];
  return [...entrypoint, ...argv];
}

/** Fits the cached config to this step's user; logs what could not be honoured. */
export function fitImageToStep(node: NodeConf, config: OciConfig, uid: number): void {
  const note = fitImageUser(config, uid);
  if (note) node.log("verbose", `runtime oci: ${note}`);
}

export { releaseImage };
