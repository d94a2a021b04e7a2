import { join } from "node:path";
import { type ConfLocation, type ConfSchema, type ConfValues, loadConfFile, parseSize } from "@jobrt/core";
import { assertTrustedFile } from "./udiroot.js";

export const IMAGE_TYPES = ["docker", "custom", "id", "local"] as const;
export type ImageType = (typeof IMAGE_TYPES)[number];
const isImageType = (name: string): name is ImageType => (IMAGE_TYPES as readonly string[]).includes(name);

export type PullPolicy = "never" | "if-missing";

/** shifter.conf after parsing, with every default filled in. */
export interface ShifterConf {
  /** The file read, or undefined when there was none (embedded defaults). */
  file?: string;
  shifterPath: string;
  /** Explicit ShifterimgPath; otherwise `<udiRootPath>/bin/shifterimg` (what shifter itself runs). */
  shifterimgPath?: string;
  udiRootConf: string;
  udiRootConfExplicit: boolean;
  defaultImage?: string;
  allowedImageTypes: ImageType[];
  imageAllow: string[];
  imageDeny: string[];
  maxImageLength: number;
  pullPolicy: PullPolicy;
  lookupTimeoutMs: number;
  pullTimeoutMs: number;
  /** Container-side path prefixes a volume source may start with; default: the siteFs targets. */
  allowedVolumeSources?: string[];
  deniedVolumeTargets: string[];
  maxVolumes: number;
  allowPerNodeCache: boolean;
  /** Bytes; undefined = no limit beyond AllowPerNodeCache. */
  maxPerNodeCache?: number;
  /** Undefined = every module enabled in udiRoot.conf. */
  allowedModules?: string[];
  /** Globs of variable names removed from the task env, on top of the built-in SHIFTER_* set. */
  stripEnv: string[];
  /** DeviceModules: CDI kind → the site module that gives a container those devices. */
  deviceModules: Record<string, string>;
  where: Record<string, ConfLocation>;
}

export const DEFAULT_SHIFTER_PATH = "/usr/bin/shifter";
export const DEFAULT_UDIROOT_CONF = "/etc/shifter/udiRoot.conf";

const absolute = (v: string) => (v.startsWith("/") ? undefined : `${JSON.stringify(v)} must be an absolute path`);
const absoluteList = (v: string[]) => v.map((p) => absolute(p)).find((e) => e !== undefined);
const GLOB_RE = /^[A-Za-z0-9_.:+@/*?-]+$/;
const globs = (v: string[]) => {
  const bad = v.find((g) => !GLOB_RE.test(g));
  return bad === undefined
    ? undefined
    : `${JSON.stringify(bad)} is not a glob over image names (letters, digits, _ . : + @ / - and * ?)`;
};
const envGlobs = (v: string[]) => {
  const bad = v.find((g) => !/^[A-Za-z_*?][A-Za-z0-9_*?]*$/.test(g));
  return bad === undefined ? undefined : `${JSON.stringify(bad)} is not a variable-name glob`;
};
const moduleNames = (v: string[]) => {
  const bad = v.find((m) => !MODULE_NAME_RE.test(m));
  return bad === undefined
    ? undefined
    : `${JSON.stringify(bad)} is not a Shifter module name (letters, digits, '.', '-'; no '_')`;
};
export const MODULE_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9.-]*$/;

const PULL_POLICIES: Record<string, PullPolicy> = { never: "never", "if-missing": "if-missing" };

export const SHIFTER_CONF_SCHEMA = {
  ShifterPath: { type: "string", check: absolute },
  ShifterimgPath: { type: "string", check: absolute },
  UdiRootConf: { type: "string", check: absolute },
  DefaultImage: { type: "string" },
  AllowedImageTypes: {
    type: "list",
    check: (v: string[]) => {
      if (v.length === 0) return "must list at least one image type";
      const bad = v.find((t) => !isImageType(t));
      return bad === undefined
        ? undefined
        : `unknown image type ${JSON.stringify(bad)} (known: ${IMAGE_TYPES.join(", ")})`;
    },
  },
  ImageAllow: { type: "list", check: globs },
  ImageDeny: { type: "list", check: globs },
  MaxImageLength: { type: "int", min: 8, max: 4096 },
  PullPolicy: { type: { enum: PULL_POLICIES } },
  LookupTimeout: { type: "int", min: 1, max: 3600 },
  PullTimeout: { type: "int", min: 1, max: 86400 },
  AllowedVolumeSources: { type: "list", check: absoluteList },
  DeniedVolumeTargets: { type: "list", check: absoluteList },
  MaxVolumes: { type: "int", min: 0, max: 1000 },
  AllowPerNodeCache: { type: "bool" },
  MaxPerNodeCache: {
    type: "string",
    check: (v: string) =>
      parseSize(v) === undefined ? `${JSON.stringify(v)} is not a size (e.g. 10G; suffixes b k m g t p e)` : undefined,
  },
  AllowedModules: { type: "list", check: moduleNames },
  StripEnv: { type: "list", check: envGlobs },
  DeviceModules: { type: "list", check: deviceModulesProblem },
} satisfies ConfSchema;

/** shifter.conf `DeviceModules`: `KIND:MODULE` pairs, a CDI kind and the site module that serves it. */
function parseDeviceModules(entries: readonly string[]): { modules: Record<string, string>; problem?: string } {
  const modules: Record<string, string> = {};
  for (const e of entries) {
    const colon = e.lastIndexOf(":");
    const kind = e.slice(0, colon);
    if (colon <= 0 || !/^[a-z0-9.-]+\/[a-zA-Z0-9_.-]+$/.test(kind) || !MODULE_NAME_RE.test(e.slice(colon + 1))) {
      return {
        modules,
        problem: `${JSON.stringify(e)} is not KIND:MODULE (a CDI kind such as nvidia.com/gpu, a Shifter module name)`,
      };
    }
    modules[kind] = e.slice(colon + 1);
  }
  return { modules };
}

function deviceModulesProblem(entries: string[]): string | undefined {
  return parseDeviceModules(entries).problem;
}

/** Reads `<confDir>/shifter.conf`; no file means every default. */
export function loadShifterConf(confDir: string, hostUid: number): ShifterConf {
  const path = join(confDir, "shifter.conf");
  const parsed = loadConfFile(path, SHIFTER_CONF_SCHEMA);
  if (parsed) assertTrustedFile(path, hostUid, "shifter.conf");
  const v: ConfValues<typeof SHIFTER_CONF_SCHEMA> = parsed?.values ?? {};
  const conf: ShifterConf = {
    shifterPath: v.ShifterPath ?? DEFAULT_SHIFTER_PATH,
    udiRootConf: v.UdiRootConf ?? DEFAULT_UDIROOT_CONF,
    udiRootConfExplicit: v.UdiRootConf !== undefined,
    allowedImageTypes: v.AllowedImageTypes?.filter(isImageType) ?? ["docker", "custom", "id"],
    imageAllow: v.ImageAllow ?? [],
    imageDeny: v.ImageDeny ?? [],
    maxImageLength: v.MaxImageLength ?? 512,
    pullPolicy: v.PullPolicy ?? "never",
    lookupTimeoutMs: (v.LookupTimeout ?? 60) * 1000,
    pullTimeoutMs: (v.PullTimeout ?? 900) * 1000,
    deniedVolumeTargets: v.DeniedVolumeTargets ?? [],
    maxVolumes: v.MaxVolumes ?? 32,
    allowPerNodeCache: v.AllowPerNodeCache ?? false,
    stripEnv: v.StripEnv ?? [],
    deviceModules: parseDeviceModules(v.DeviceModules ?? []).modules,
    where: parsed?.where ?? {},
  };
  if (parsed) conf.file = path;
  if (v.ShifterimgPath !== undefined) conf.shifterimgPath = v.ShifterimgPath;
  if (v.DefaultImage !== undefined) conf.defaultImage = v.DefaultImage;
  if (v.AllowedVolumeSources !== undefined) conf.allowedVolumeSources = v.AllowedVolumeSources;
  if (v.AllowedModules !== undefined) conf.allowedModules = v.AllowedModules;
  // MaxPerNodeCache's check has made sure a size that is set parses.
  const max = v.MaxPerNodeCache === undefined ? undefined : parseSize(v.MaxPerNodeCache);
  if (max !== undefined) conf.maxPerNodeCache = max;
  return conf;
}

/** "shifter.conf:12 DefaultImage" for messages about a value that came from the file. */
export function confRef(conf: ShifterConf, key: string): string {
  const at = conf.where[key];
  return at ? `${at.file}:${at.line} ${key}` : key;
}
