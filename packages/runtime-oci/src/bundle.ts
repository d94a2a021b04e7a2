import { isAbsolute, join } from "node:path";
import { type DeviceEdits, jobrtError } from "@jobrt/core";
import { devicesCgroupRefusesWhitelist } from "./devicecgroup.js";
import { applyDeviceEdits, nestDeviceRules } from "./devices.js";

export type OciConfig = Record<string, unknown>;

export interface BundleConfig {
  /** The parsed config.json. */
  config: OciConfig;
  /** Absolute rootfs: `root.path`, relative paths taken from the bundle dir. */
  rootfs: string;
  /** The bundle's `process.env`. */
  env: string[];
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Parses `<bundle>/config.json` text and finds the rootfs (runtime-oci.md, Lifecycle). */
export function parseBundleConfig(text: string, file: string, bundleDir: string): BundleConfig {
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw jobrtError(
      "ERR_CONTAINER_REQUEST",
      { problem: `${file}: not valid JSON: ${(error as Error).message}` },
      { details: { file } },
    );
  }
  if (!isObject(config))
    throw jobrtError(
      "ERR_CONTAINER_REQUEST",
      { problem: `${file}: the top level must be a JSON object` },
      { details: { file } },
    );
  const root = config.root;
  const path = isObject(root) ? root.path : undefined;
  if (typeof path !== "string" || path === "") {
    throw jobrtError(
      "ERR_CONTAINER_REQUEST",
      { problem: `${file}: root.path is missing (an OCI bundle's config.json names its rootfs there)` },
      {
        details: { file, key: "root.path" },
      },
    );
  }
  const proc = config.process;
  if (proc !== undefined && !isObject(proc))
    throw jobrtError(
      "ERR_CONTAINER_REQUEST",
      { problem: `${file}: process must be an object` },
      { details: { file, key: "process" } },
    );
  const rawEnv = isObject(proc) ? proc.env : undefined;
  if (rawEnv !== undefined && !(Array.isArray(rawEnv) && rawEnv.every((e) => typeof e === "string"))) {
    throw jobrtError(
      "ERR_CONTAINER_REQUEST",
      { problem: `${file}: process.env must be an array of strings` },
      { details: { file, key: "process.env" } },
    );
  }
  return {
    config,
    rootfs: isAbsolute(path) ? path : join(bundleDir, path),
    env: (rawEnv as string[] | undefined) ?? [],
  };
}

export interface Mount {
  destination: string;
  type: string;
  source: string;
  options: string[];
}

export interface RewriteOptions {
  terminal: boolean;
  rootfs: string;
  /** The step spool dir bind mount (runtime-oci.md, Lifecycle), appended after every other mount. */
  spoolMount?: { source: string; destination: string };
  /** More bind mounts (--container-volume). */
  extraMounts: Mount[];
  disableHooks: readonly string[];
  env: string[];
  args: string[];
  /** --container-workdir: process.cwd inside the container. */
  cwd?: string;
  /** The host's resolved CDI edits (--container-device); applied before DisableHooks. */
  devices?: DeviceEdits;
  /**
   * Does this process's devices cgroup refuse runc's whitelist (devicecgroup.ts)? Probed when not
   * given; the device rules are then a blacklist (devices.ts nestDeviceRules).
   */
  devicesCgroupRefusesWhitelist?: boolean;
}

/**
 * The per-task config.json (runtime-oci.md, Lifecycle): terminal, absolute root.path, mounts (spool dir last),
 * DisableHooks removed (runtime-oci.md W10: really removed), process.env rebuilt, process.args = task argv.
 * Returns a new object; the bundle's own config is never modified.
 */
export function rewriteConfig(original: OciConfig, o: RewriteOptions): OciConfig {
  const config = structuredClone(original);
  const proc = isObject(config.process) ? config.process : {};
  config.process = proc;
  proc.terminal = o.terminal;
  const root = isObject(config.root) ? config.root : {};
  config.root = root;
  root.path = o.rootfs;
  const mounts = Array.isArray(config.mounts) ? config.mounts : [];
  config.mounts = mounts;
  mounts.push(...o.extraMounts);
  if (o.devices) applyDeviceEdits(config, o.devices);
  nestDeviceRules(config, () => o.devicesCgroupRefusesWhitelist ?? devicesCgroupRefusesWhitelist());
  if (o.spoolMount)
    mounts.push({
      destination: o.spoolMount.destination,
      type: "none",
      source: o.spoolMount.source,
      options: ["bind"],
    });
  if (isObject(config.hooks)) {
    const hooks = config.hooks;
    for (const kind of o.disableHooks) delete hooks[kind];
  }
  proc.env = o.env;
  proc.args = o.args;
  if (o.cwd !== undefined) proc.cwd = o.cwd;
  return config;
}

/** `--container-volume SRC:DST[:ro|rw]` as an OCI bind mount. */
export function parseVolume(spec: string): Mount {
  const parts = spec.split(":");
  const [source, destination, flag] = parts;
  if (
    parts.length < 2 ||
    parts.length > 3 ||
    !source ||
    !destination ||
    !isAbsolute(source) ||
    !isAbsolute(destination)
  ) {
    throw jobrtError(
      "ERR_CONTAINER_REQUEST",
      { problem: `--container-volume ${JSON.stringify(spec)}: expected /host/path:/container/path[:ro|rw]` },
      {
        details: { key: "--container-volume" },
      },
    );
  }
  if (flag !== undefined && flag !== "ro" && flag !== "rw") {
    throw jobrtError(
      "ERR_CONTAINER_REQUEST",
      { problem: `--container-volume ${JSON.stringify(spec)}: the third field must be ro or rw` },
      {
        details: { key: "--container-volume" },
      },
    );
  }
  return { destination, type: "none", source, options: flag === "ro" ? ["rbind", "ro"] : ["rbind"] };
}

interface IdMapping {
  containerID: number;
  hostID: number;
  size: number;
}

/**
 * Fits a bundle to rootless runc for the job user (embedded default only): it must have a user
 * namespace; single-id mappings (what `runc spec --rootless` writes, for whoever ran it) are
 * pointed at the job's uid and gid, so one rootless bundle serves every user. Wider mappings
 * (subuid ranges) are left alone. Returns what is wrong, or undefined.
 */
export function fitRootless(config: OciConfig, uid: number, gid: number): string | undefined {
  const linux = isObject(config.linux) ? config.linux : undefined;
  const namespaces = Array.isArray(linux?.namespaces) ? linux.namespaces : [];
  if (!linux || !namespaces.some((n) => isObject(n) && n.type === "user")) {
    return "the bundle has no user namespace, so it cannot run rootless; create its config.json with `runc spec --rootless`, or run as root";
  }
  const point = (key: "uidMappings" | "gidMappings", id: number) => {
    const m = linux[key];
    if (m === undefined || (Array.isArray(m) && m.length === 1 && isObject(m[0]) && m[0].size === 1)) {
      const containerID =
        Array.isArray(m) && isObject(m[0]) && typeof m[0].containerID === "number" ? m[0].containerID : 0;
      linux[key] = [{ containerID, hostID: id, size: 1 } satisfies IdMapping];
    }
  };
  point("uidMappings", uid);
  point("gidMappings", gid);
  return undefined;
}
