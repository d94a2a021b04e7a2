import type { StepRecord } from "@jobrt/core";
import { type ShifterConf, confRef } from "./conf.js";
import { addDeviceModules } from "./devices.js";
import { parseEnvEntries } from "./env.js";
import { type ImageRef, parseImage } from "./image.js";
import { parseModules } from "./modules.js";
import { reject } from "./reject.js";
import type { UdiRootConf } from "./udiroot.js";
import { type Volume, checkVolumeSet, parseVolume } from "./volume.js";

/** `--container-workdir=image` / `--container-entrypoint=image`: use the image's WORKDIR / ENTRY. */
export const FROM_IMAGE = "image";

/** A step's container request after strict validation: everything `shifter` will be given. */
export interface ShifterRequest {
  image: ImageRef;
  /** Where the image came from, for messages: "--container" or "shifter.conf:3 DefaultImage". */
  imageField: string;
  volumes: Volume[];
  modules: string[];
  env: string[];
  /** Absolute path, FROM_IMAGE, or undefined (shifter uses the caller's cwd). */
  workdir?: string;
  entrypoint?: string;
  clearEnv: boolean;
}

export const FIELDS = {
  image: "--container",
  volume: "--container-volume",
  module: "--container-module",
  env: "--container-env",
  workdir: "--container-workdir",
  entrypoint: "--container-entrypoint",
  option: "--container-opt",
} as const;

/** True when the step asks for something this runtime would act on. */
export function wantsContainer(step: StepRecord): boolean {
  const c = step.container;
  if (!c) return false;
  return (
    c.value !== undefined ||
    c.volumes.length > 0 ||
    c.modules.length > 0 ||
    c.env.length > 0 ||
    c.workdir !== undefined ||
    c.entrypoint !== undefined ||
    c.clearEnv ||
    Object.keys(c.options).length > 0
  );
}

/**
 * Validates the whole request (docs/runtime-shifter.md, "What is validated, and why"). Returns undefined when the step has no image at
 * all (not a Shifter step: the host runs the task directly). Throws on the first broken rule.
 */
export function validateRequest(
  step: StepRecord,
  conf: ShifterConf,
  udi: UdiRootConf | undefined,
): ShifterRequest | undefined {
  const c = step.container;
  const given = c?.value;
  let imageText: string | undefined = given;
  let imageField: string = FIELDS.image;
  if (imageText === undefined && conf.defaultImage !== undefined) {
    imageText = conf.defaultImage;
    imageField = confRef(conf, "DefaultImage");
  }
  if (imageText === undefined) {
    if (wantsContainer(step)) {
      throw reject(
        FIELDS.image,
        "",
        "container options were given without an image: add --container IMAGE (or set DefaultImage in shifter.conf)",
      );
    }
    return undefined;
  }
  if (step.uid === 0 || step.gid === 0) {
    throw reject(
      "--uid/--gid",
      `${step.uid}:${step.gid}`,
      "shifter refuses to run as root (uid or gid 0): run the step as a non-root user",
    );
  }
  const image = parseImage(imageText, imageField, conf, udi);
  const request: ShifterRequest = {
    image,
    imageField,
    volumes: [],
    modules: [],
    env: [],
    clearEnv: c?.clearEnv ?? false,
  };
  if (!c) return request;
  const optionKeys = Object.keys(c.options);
  if (optionKeys.length > 0) {
    throw reject(
      FIELDS.option,
      optionKeys[0] as string,
      "the shifter runtime takes no --container-opt options; use the --container-* options",
    );
  }
  request.volumes = c.volumes.map((v) => parseVolume(v, FIELDS.volume, conf, udi));
  checkVolumeSet(request.volumes, c.volumes, FIELDS.volume, conf, udi);
  request.modules = parseModules(c.modules, FIELDS.module, conf, udi);
  request.env = parseEnvEntries(c.env, FIELDS.env);
  if (c.workdir !== undefined) request.workdir = checkAbsolute(c.workdir, FIELDS.workdir, false);
  if (c.entrypoint !== undefined) request.entrypoint = checkAbsolute(c.entrypoint, FIELDS.entrypoint, true);
  addDeviceModules(request, c.deviceEdits, conf, udi);
  return request;
}

function checkAbsolute(value: string, field: string, noSpaces: boolean): string {
  if (value === FROM_IMAGE) return value;
  if (!value.startsWith("/"))
    throw reject(field, value, `is not an absolute path (or write "${FROM_IMAGE}" to use the image's own)`);
  if (/[\0\n\r]/.test(value)) throw reject(field, value, "contains a NUL or line break");
  if (value.split("/").includes("..")) throw reject(field, value, "contains '..'");
  if (noSpaces && /\s/.test(value)) {
    throw reject(
      field,
      value,
      "contains white space; shifter does not split the entrypoint, it would look for a file with that whole name",
    );
  }
  return value;
}
