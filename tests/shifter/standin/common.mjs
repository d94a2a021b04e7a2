// @ts-check
// Part of the Shifter STAND-IN used by jobrt's tests (not Shifter, not for production).
// What the stand-in shifter and shifterimg share: udiRoot.conf, image descriptors, the gateway.

import { readFileSync, renameSync, statSync, writeFileSync } from "node:fs";

/** Keys Shifter 22.02's udiRoot.conf parser knows; anything else is fatal, as in UdiRootConfig.c. */
const KNOWN_KEYS = new Set([
  "udiMount",
  "loopMount",
  "imagePath",
  "udiRootPath",
  "etcPath",
  "modprobePath",
  "insmodPath",
  "cpPath",
  "mvPath",
  "chmodPath",
  "ddPath",
  "mkfsXfsPath",
  "rootfsType",
  "imageGateway",
  "system",
  "gatewayTimeout",
  "siteFs",
  "siteEnv",
  "siteEnvAppend",
  "siteEnvPrepend",
  "siteEnvUnset",
  "siteResources",
  "defaultImageType",
  "allowLocalChroot",
  "defaultModules",
  "optUdiImage",
  "mountUdiRootWritable",
  "maxGroupCount",
  "perNodeCachePath",
  "perNodeCacheSizeLimit",
  "perNodeCacheAllowedFsType",
  "sitePreMountHook",
  "sitePostMountHook",
  "populateEtcDynamically",
  "allowLibcPwdCalls",
  "usersToImport",
  "kmodBasePath",
  "kmodCacheFile",
  "batchType",
  "sshPath",
  "nodeContextPrefix",
  "siteShell",
]);
const MODULE_SUBKEYS = new Set([
  "siteEnv",
  "siteEnvAppend",
  "siteEnvPrepend",
  "siteEnvUnset",
  "siteFs",
  "copyPath",
  "userhook",
  "roothook",
  "conflict",
  "enabled",
]);
const REQUIRED = [
  "udiMount",
  "loopMount",
  "imagePath",
  "udiRootPath",
  "etcPath",
  "modprobePath",
  "insmodPath",
  "cpPath",
  "mvPath",
  "chmodPath",
  "ddPath",
  "rootfsType",
];

/** Thrown for failures that end the program with a message and an exit status. */
export class Exit extends Error {
  /** @param {number} status @param {string[]} stderr @param {string[]} [stdout] */
  constructor(status, stderr, stdout = []) {
    super(stderr.join("\n"));
    this.status = status;
    this.stderr = stderr;
    this.stdout = stdout;
  }
}

/**
 * @typedef {{name: string, siteEnv: string[], siteEnvAppend: string[], siteEnvPrepend: string[], siteEnvUnset: string[],
 *   siteFs: string, copyPath: string, userhook: string, conflict: string[], enabled: boolean}} Module
 * @typedef {{values: Map<string, string>, modules: Map<string, Module>, file: string}} UdiConf
 */

/** Reads udiRoot.conf like UdiRootConfig.c: `#` only in column 0, lines without `=` ignored, `\` continues. */
export function readUdiRootConf(/** @type {string} */ file) {
  const fail = () => new Exit(1, ["FAILED to parse udiRoot configuration."]);
  let text;
  try {
    const st = statSync(file);
    if (st.uid !== 0 || (st.mode & 0o022) !== 0) throw fail();
    text = readFileSync(file, "utf8");
  } catch (error) {
    if (error instanceof Exit) throw error;
    throw fail();
  }
  /** @type {Map<string, string>} */
  const values = new Map();
  /** @type {Map<string, Module>} */
  const modules = new Map();
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    let line = /** @type {string} */ (lines[i]);
    while (line.endsWith("\\") && i + 1 < lines.length) line = line.slice(0, -1) + lines[++i];
    if (line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq < 0) continue;
    const key = line.slice(0, eq).trim();
    const value = line.slice(eq + 1).trim();
    const m = /^module_([^_]+)_(.+)$/.exec(key);
    if (m) {
      const [, name, sub] = /** @type {[string, string, string]} */ (/** @type {unknown} */ (m));
      if (!MODULE_SUBKEYS.has(sub)) throw fail();
      const mod = modules.get(name) ?? {
        name,
        siteEnv: [],
        siteEnvAppend: [],
        siteEnvPrepend: [],
        siteEnvUnset: [],
        siteFs: "",
        copyPath: "",
        userhook: "",
        conflict: [],
        enabled: true,
      };
      if (sub === "enabled") mod.enabled = value !== "0";
      else if (sub === "conflict") mod.conflict = value.split(/[\s,]+/).filter(Boolean);
      else if (sub === "siteFs" || sub === "copyPath" || sub === "userhook") mod[sub] = value;
      else if (sub !== "roothook") mod[/** @type {"siteEnv"} */ (sub)] = value.split(/\s+/).filter(Boolean);
      modules.set(name, mod);
      continue;
    }
    if (!KNOWN_KEYS.has(key)) throw fail();
    values.set(key, value);
  }
  for (const key of REQUIRED) if (!values.get(key)) throw fail();
  return { values, modules, file };
}

export const IMAGE_TYPES = ["docker", "custom", "id", "local"];

/**
 * Shifter's image descriptor parsing (ImageData.c): a known type before the first `:`, else
 * defaultImageType; the tag silently filtered to [A-Za-z0-9_:.+@-] (plus `/` for docker and local).
 * @returns {{type: string, tag: string} | undefined}
 */
export function parseImageDescriptor(/** @type {string} */ text, /** @type {UdiConf} */ conf) {
  const colon = text.indexOf(":");
  let type = colon < 0 ? "" : text.slice(0, colon);
  let tag;
  if (IMAGE_TYPES.includes(type)) tag = text.slice(colon + 1);
  else {
    const def = conf.values.get("defaultImageType");
    if (!def) return undefined;
    type = def;
    tag = text;
  }
  tag = filterTag(tag, type === "docker" || type === "local");
  if (tag === "") return undefined;
  return { type, tag };
}

export function filterTag(/** @type {string} */ tag, /** @type {boolean} */ slash) {
  return [...tag].filter((c) => /[A-Za-z0-9_:.+@-]/.test(c) || (slash && c === "/")).join("");
}

/** The gateway's normalisation: docker images without a tag are `:latest`. */
export function gatewayName(/** @type {string} */ type, /** @type {string} */ tag) {
  if ((type === "docker" || type === "custom") && !tag.includes(":") && !tag.includes("@"))
    return `${type}:${tag}:latest`;
  return `${type}:${tag}`;
}

/**
 * The stand-in image gateway: a JSON file named by udiRoot.conf imageGateway=file:///path.
 * @typedef {{id: string, status: string, userAcl?: number[], groupAcl?: number[], pulled?: string}} GatewayImage
 * @typedef {{system: string, images: Record<string, GatewayImage>, pullable?: Record<string, {id: string, steps?: string[], final: string}>, pullDelayMs?: number}} GatewayDb
 */
export function gatewayPath(/** @type {UdiConf} */ conf) {
  const url = (conf.values.get("imageGateway") ?? "").split(/\s+/).find((u) => u.startsWith("file://"));
  return url ? url.slice("file://".length) : undefined;
}

/** @returns {GatewayDb | undefined} undefined when the gateway cannot be contacted */
export function readGateway(/** @type {UdiConf} */ conf) {
  const path = gatewayPath(conf);
  if (!path) return undefined;
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return undefined;
  }
}

export function writeGateway(/** @type {UdiConf} */ conf, /** @type {GatewayDb} */ db) {
  const path = /** @type {string} */ (gatewayPath(conf));
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(db, null, 2)}\n`);
  renameSync(tmp, path);
}

/** Whether the calling user may see an image: no ACL, or uid / gid / a group in it. */
export function aclAllows(/** @type {number[] | undefined} */ userAcl, /** @type {number[] | undefined} */ groupAcl) {
  const users = userAcl ?? [];
  const groups = groupAcl ?? [];
  if (users.length === 0 && groups.length === 0) return true;
  const uid = /** @type {number} */ (process.getuid?.());
  const gids = new Set([/** @type {number} */ (process.getgid?.()), ...(process.getgroups?.() ?? [])]);
  return users.includes(uid) || groups.some((g) => gids.has(g));
}
