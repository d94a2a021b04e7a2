import { join } from "node:path";
import { type ConfLocation, type ConfSchema, loadConfFile } from "@jobrt/core";
import { assertTrustedFile } from "./udiroot.js";

export const IMAGE_TYPES = ["docker", "custom", "id", "local"] as const;
export type ImageType = (typeof IMAGE_TYPES)[number];

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
  return bad === undefined ? undefined : `${JSON.stringify(bad)} is not a glob over image names (letters, digits, _ . : + @ / - and * ?)`;
};
const envGlobs = (v: string[]) => {
  const bad = v.find((g) => !/^[A-Za-z_*?][A-Za-z0-9_*?]*$/.test(g));
  return bad === undefined ? undefined : `${JSON.stringify(bad)} is not a variable-name glob`;
};
const moduleNames = (v: string[]) => {
  const bad = v.find((m) => !MODULE_NAME_RE.test(m));
  return bad === undefined ? undefined : `${JSON.stringify(bad)} is not a Shifter module name (letters, digits, '.', '-'; no '_')`;
};
export const MODULE_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9.-]*$/;

/** `10G`, `512M`, `100` (bytes): Shifter's size suffixes b k m g t p e. */
export function parseSize(text: string): number | undefined {
  const m = /^(\d+)([bkmgtpe]?)$/i.exec(text);
  if (!m) return undefined;
  const power = "bkmgtpe".indexOf((m[2] || "b").toLowerCase());
  return Number(m[1]) * 1024 ** power;
}

export const SHIFTER_CONF_SCHEMA: ConfSchema = {
  ShifterPath: { type: "string", check: absolute as (v: never) => string | undefined },
  ShifterimgPath: { type: "string", check: absolute as (v: never) => string | undefined },
  UdiRootConf: { type: "string", check: absolute as (v: never) => string | undefined },
  DefaultImage: { type: "string" },
  AllowedImageTypes: {
    type: "list",
    check: ((v: string[]) => {
      if (v.length === 0) return "must list at least one image type";
      const bad = v.find((t) => !(IMAGE_TYPES as readonly string[]).includes(t));
      return bad === undefined ? undefined : `unknown image type ${JSON.stringify(bad)} (known: ${IMAGE_TYPES.join(", ")})`;
    }) as (v: never) => string | undefined,
  },
  ImageAllow: { type: "list", check: globs as (v: never) => string | undefined },
  ImageDeny: { type: "list", check: globs as (v: never) => string | undefined },
  MaxImageLength: { type: "int", min: 8, max: 4096 },
  PullPolicy: { type: { enum: { never: "never", "if-missing": "if-missing" } } },
  LookupTimeout: { type: "int", min: 1, max: 3600 },
  PullTimeout: { type: "int", min: 1, max: 86400 },
  AllowedVolumeSources: { type: "list", check: absoluteList as (v: never) => string | undefined },
  DeniedVolumeTargets: { type: "list", check: absoluteList as (v: never) => string | undefined },
  MaxVolumes: { type: "int", min: 0, max: 1000 },
  AllowPerNodeCache: { type: "bool" },
  MaxPerNodeCache: {
    type: "string",
    check: ((v: string) => (parseSize(v) === undefined ? `${JSON.stringify(v)} is not a size (e.g. 10G; suffixes b k m g t p e)` : undefined)) as (
      v: never,
    ) => string | undefined,
  },
  AllowedModules: { type: "list", check: moduleNames as (v: never) => string | undefined },
  StripEnv: { type: "list", check: envGlobs as (v: never) => string | undefined },
  DeviceModules: { type: "list", check: ((v: string[]) => deviceModulesProblem(v)) as (v: never) => string | undefined },
};

/** shifter.conf `DeviceModules`: `KIND:MODULE` pairs, a CDI kind and the site module that serves it. */
function parseDeviceModules(entries: readonly string[]): Record<string, string> | string {
  const map: Record<string, string> = {};
  for (const e of entries) {
    const colon = e.lastIndexOf(":");
    const kind = e.slice(0, colon);
    if (colon <= 0 || !/^[a-z0-9.-]+\/[a-zA-Z0-9_.-]+$/.test(kind) || !/^[A-Za-z0-9][A-Za-z0-9.-]*$/.test(e.slice(colon + 1))) {
      return `${JSON.stringify(e)} is not KIND:MODULE (a CDI kind such as nvidia.com/gpu, a Shifter module name)`;
    }
    map[kind] = e.slice(colon + 1);
  }
  return map;
}

function deviceModulesProblem(entries: string[]): string | undefined {
  const parsed = parseDeviceModules(entries);
  return typeof parsed === "string" ? parsed : undefined;
}

/** Reads `<confDir>/shifter.conf`; no file means every default. */
export function loadShifterConf(confDir: string, hostUid: number): ShifterConf {
  const path = join(confDir, "shifter.conf");
  const parsed = loadConfFile(path, SHIFTER_CONF_SCHEMA);
  if (parsed) assertTrustedFile(path, hostUid, "shifter.conf");
  const v = parsed?.values ?? {};
  const str = (k: string) => v[k] as string | undefined;
  const list = (k: string) => v[k] as string[] | undefined;
  const int = (k: string) => v[k] as number | undefined;
  const conf: ShifterConf = {
    shifterPath: str("ShifterPath") ?? DEFAULT_SHIFTER_PATH,
    udiRootConf: str("UdiRootConf") ?? DEFAULT_UDIROOT_CONF,
    udiRootConfExplicit: str("UdiRootConf") !== undefined,
    allowedImageTypes: (list("AllowedImageTypes") as ImageType[] | undefined) ?? ["docker", "custom", "id"],
    imageAllow: list("ImageAllow") ?? [],
    imageDeny: list("ImageDeny") ?? [],
    maxImageLength: int("MaxImageLength") ?? 512,
    pullPolicy: (str("PullPolicy") as PullPolicy | undefined) ?? "never",
    lookupTimeoutMs: (int("LookupTimeout") ?? 60) * 1000,
    pullTimeoutMs: (int("PullTimeout") ?? 900) * 1000,
    deniedVolumeTargets: list("DeniedVolumeTargets") ?? [],
    maxVolumes: int("MaxVolumes") ?? 32,
    allowPerNodeCache: (v.AllowPerNodeCache as boolean | undefined) ?? false,
    stripEnv: list("StripEnv") ?? [],
    deviceModules: parseDeviceModules(list("DeviceModules") ?? []) as Record<string, string>,
    where: parsed?.where ?? {},
  };
  if (parsed) conf.file = path;
  const optional: [keyof ShifterConf, string | string[] | undefined][] = [
    ["shifterimgPath", str("ShifterimgPath")],
    ["defaultImage", str("DefaultImage")],
    ["allowedVolumeSources", list("AllowedVolumeSources")],
    ["allowedModules", list("AllowedModules")],
  ];
  for (const [key, value] of optional) if (value !== undefined) (conf as unknown as Record<string, unknown>)[key] = value;
  const max = str("MaxPerNodeCache");
  if (max !== undefined) conf.maxPerNodeCache = parseSize(max) as number;
  return conf;
}

/** "shifter.conf:12 DefaultImage" for messages about a value that came from the file. */
export function confRef(conf: ShifterConf, key: string): string {
  const at = conf.where[key];
  return at ? `${at.file}:${at.line} ${key}` : key;
}
