import { hostname, tmpdir } from "node:os";
import { isAbsolute, join } from "node:path";
import { DEVICE_SCHEMA, deviceConfFrom } from "./devices/conf.js";
import type { DeviceConf } from "./devices/resolve.js";
import { PROCTRACK_MODES, type ProcTrackMode } from "./session/proctrack/proctrack.js";
import {
  type ConfSchema,
  DEFAULT_ALLOWED_RUNTIMES,
  DEFAULT_RUNTIME,
  type JobrtError,
  type ParsedConf,
  confError,
  loadConfFile,
  normalizeRuntimeName,
} from "@jobrt/core";

/** jobrt.conf, with every key's embedded default filled in. */
export interface SiteConfig {
  confDir: string;
  /** Path of jobrt.conf, or undefined when the node has none (embedded defaults). */
  file?: string;
  defRuntimePlugin: string;
  runtimePlugins: string[];
  /** Where runtime packages are resolved from; undefined means beside @jobrt/cli. */
  pluginDir?: string;
  spoolDir: string;
  nodeName: string;
  killWait: number;
  /** Seconds a runtime's init may take before the load fails. */
  pluginInitTimeout: number;
  /** How a step's processes are tracked and killed (docs/reliability.md). */
  procTrack: ProcTrackMode;
  /** Where each step's start and end lines go (docs/cli.md, "The node log"). */
  nodeLog: NodeLogTarget;
  /** The syslog facility of those lines, by name (`daemon`, `local0`...). */
  nodeLogFacility: string;
  /** CDI devices: spec dirs, site defaults, the GRES mapping (docs/devices.md). */
  devices: DeviceConf;
  warnings: string[];
}

/** jobrt.conf NodeLog: `off`, `syslog[:SOCKET]` (a datagram socket, /dev/log by default) or `file:PATH`. */
export type NodeLogTarget = { kind: "off" } | { kind: "syslog"; socket: string } | { kind: "file"; path: string };

/** syslog(3)'s facilities a program may log under, and their codes (RFC 5424, section 6.2.1). */
export const SYSLOG_FACILITIES: Readonly<Record<string, number>> = {
  user: 1,
  mail: 2,
  daemon: 3,
  auth: 4,
  syslog: 5,
  lpr: 6,
  news: 7,
  uucp: 8,
  cron: 9,
  authpriv: 10,
  ftp: 11,
  local0: 16,
  local1: 17,
  local2: 18,
  local3: 19,
  local4: 20,
  local5: 21,
  local6: 22,
  local7: 23,
};

const SCHEMA = {
  DefRuntimePlugin: { type: "string" },
  RuntimePlugins: { type: "list" },
  PluginDir: { type: "string" },
  SpoolDir: { type: "string" },
  NodeName: { type: "string" },
  KillWait: { type: "int", min: 0, max: 65535 },
  PluginInitTimeout: { type: "int", min: 1, max: 3600 },
  ProcTrack: { type: "string" },
  NodeLog: { type: "string" },
  NodeLogFacility: { type: "string" },
  ...DEVICE_SCHEMA,
} satisfies ConfSchema;

type SiteConf = ParsedConf<typeof SCHEMA>;

/** Where the conf dir is: --conf-dir, else $JOBRT_CONF_DIR, else /etc/jobrt. */
export function confDirFrom(option: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  // An empty $JOBRT_CONF_DIR is unset, not "the current directory".
  return option ?? (env.JOBRT_CONF_DIR || "/etc/jobrt");
}

/**
 * SpoolDir with Slurm's SlurmdSpoolDir patterns expanded: %n the node name, %h the host name, so
 * several nodes that share one jobrt.conf (and file system) each get a SpoolDir of their own.
 */
export function spoolDirFor(spoolDir: string, nodeName: string): string {
  return spoolDir.replace(/%([nh%])/g, (_, c: string) =>
    c === "n" ? nodeName : c === "h" ? (hostname().split(".")[0] ?? "localhost") : "%",
  );
}

/**
 * The node's name, decided here for every command: SLURMD_NODENAME when slurmd set it (for a
 * task's `jobrt exec` and for the Epilog's `jobrt gc --job` alike), else jobrt.conf NodeName,
 * else the short host name. `jobrt exec` and `jobrt gc` must agree on it: it expands SpoolDir's
 * %n, and a gc that expands it otherwise looks in another SpoolDir (docs/slurm.md).
 */
export function nodeNameFor(site: Pick<SiteConfig, "nodeName">, env: NodeJS.ProcessEnv = process.env): string {
  return env.SLURMD_NODENAME || site.nodeName;
}

/** SpoolDir when jobrt.conf does not set one: a system dir for root, a private one otherwise. */
export function defaultSpoolDir(uid = process.getuid?.() ?? 0): string {
  return uid === 0 ? "/var/spool/jobrt" : join(tmpdir(), `jobrt-${uid}`);
}

/** Linux's HOST_NAME_MAX: a node name is a host name (SLURMD_NODENAME, `%n` in paths and container ids). */
const MAX_NODE_NAME = 64;

/** Linux's PATH_MAX counts the terminating NUL; a longer path fails every system call later, far from its line. */
const MAX_PATH_BYTES = 4095;

/** sockaddr_un's sun_path holds 108 bytes with the terminating NUL (unix(7)). */
const MAX_SOCKET_PATH_BYTES = 107;

function checkedPath(parsed: SiteConf, key: string, value: string, limit = MAX_PATH_BYTES): string {
  if (!isAbsolute(value)) throw confError(parsed.where[key]!, key, `${JSON.stringify(value)} must be an absolute path`);
  const bytes = Buffer.byteLength(value);
  if (bytes > limit)
    throw confError(parsed.where[key]!, key, `a path of ${bytes} bytes is longer than the ${limit}-byte limit`);
  return value;
}

/** NodeLog's value: a bad one is refused at its line, like every key. */
function nodeLogFrom(parsed: SiteConf): NodeLogTarget {
  const value = parsed.values.NodeLog;
  if (value === undefined || value.toLowerCase() === "syslog") return { kind: "syslog", socket: "/dev/log" };
  if (value.toLowerCase() === "off") return { kind: "off" };
  const colon = value.indexOf(":");
  const kind = value.slice(0, colon).toLowerCase();
  const path = value.slice(colon + 1);
  if (colon > 0 && kind === "syslog")
    return { kind, socket: checkedPath(parsed, "NodeLog", path, MAX_SOCKET_PATH_BYTES) };
  if (colon > 0 && kind === "file") return { kind, path: checkedPath(parsed, "NodeLog", path) };
  throw confError(
    parsed.where.NodeLog!,
    "NodeLog",
    `${JSON.stringify(value)} is not one of syslog, syslog:/SOCKET, file:/PATH, off`,
  );
}

function facilityFrom(parsed: SiteConf): string {
  const value = parsed.values.NodeLogFacility;
  if (value === undefined) return "daemon";
  const name = value.toLowerCase();
  if (!Object.hasOwn(SYSLOG_FACILITIES, name)) {
    throw confError(
      parsed.where.NodeLogFacility!,
      "NodeLogFacility",
      `${JSON.stringify(value)} is not one of ${Object.keys(SYSLOG_FACILITIES).join(", ")}`,
    );
  }
  return name;
}

function absolutePath(parsed: SiteConf, key: "PluginDir" | "SpoolDir"): string | undefined {
  const value = parsed.values[key];
  return value === undefined ? undefined : checkedPath(parsed, key, value);
}

function runtimeName(parsed: SiteConf, key: string, value: string): string {
  try {
    return normalizeRuntimeName(value).name;
  } catch (error) {
    throw confError(parsed.where[key]!, key, (error as JobrtError).message);
  }
}

function nodeNameFrom(parsed: SiteConf): string | undefined {
  const name = parsed.values.NodeName;
  if (name === undefined) return undefined;
  // Checked first: a name of a million characters went into every task's environment (E2BIG).
  if (name.length > MAX_NODE_NAME)
    throw confError(
      parsed.where.NodeName!,
      "NodeName",
      `a name of ${name.length} characters is longer than the ${MAX_NODE_NAME}-character limit of a host name`,
    );
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name))
    throw confError(parsed.where.NodeName!, "NodeName", `${JSON.stringify(name)} is not a host name`);
  return name;
}

function procTrackFrom(parsed: SiteConf): ProcTrackMode | undefined {
  const value = parsed.values.ProcTrack;
  if (value === undefined) return undefined;
  const text = value.toLowerCase();
  const mode = PROCTRACK_MODES.find((m) => m === text);
  if (mode === undefined)
    throw confError(
      parsed.where.ProcTrack!,
      "ProcTrack",
      `${JSON.stringify(value)} is not one of ${PROCTRACK_MODES.join(", ")}`,
    );
  return mode;
}

/**
 * Reads `<confDir>/jobrt.conf`; a missing file means all embedded defaults. A dangling symlink or
 * anything but a regular file is an error (it is not "missing": someone meant a file there).
 */
export function loadSiteConfig(confDir: string): SiteConfig {
  const file = join(confDir, "jobrt.conf");
  const parsed = loadConfFile(file, SCHEMA);
  const config: SiteConfig = {
    confDir,
    defRuntimePlugin: DEFAULT_RUNTIME,
    runtimePlugins: [...DEFAULT_ALLOWED_RUNTIMES],
    spoolDir: defaultSpoolDir(),
    nodeName: hostname().split(".")[0] ?? "localhost",
    killWait: 10,
    pluginInitTimeout: 30,
    procTrack: "auto",
    nodeLog: { kind: "syslog", socket: "/dev/log" },
    nodeLogFacility: "daemon",
    devices: deviceConfFrom(undefined),
    warnings: [],
  };
  if (!parsed) return config;
  config.devices = deviceConfFrom(parsed);
  config.file = file;
  config.warnings = parsed.warnings;
  const v = parsed.values;
  if (v.DefRuntimePlugin !== undefined)
    config.defRuntimePlugin = runtimeName(parsed, "DefRuntimePlugin", v.DefRuntimePlugin);
  if (v.RuntimePlugins !== undefined) {
    const list = v.RuntimePlugins.map((n) => runtimeName(parsed, "RuntimePlugins", n));
    if (list.length === 0)
      throw confError(parsed.where.RuntimePlugins!, "RuntimePlugins", "must name at least one runtime");
    config.runtimePlugins = list;
  }
  const pluginDir = absolutePath(parsed, "PluginDir");
  if (pluginDir) config.pluginDir = pluginDir;
  config.spoolDir = absolutePath(parsed, "SpoolDir") ?? config.spoolDir;
  config.nodeName = nodeNameFrom(parsed) ?? config.nodeName;
  config.nodeLog = nodeLogFrom(parsed);
  config.nodeLogFacility = facilityFrom(parsed);
  if (v.KillWait !== undefined) config.killWait = v.KillWait;
  if (v.PluginInitTimeout !== undefined) config.pluginInitTimeout = v.PluginInitTimeout;
  config.procTrack = procTrackFrom(parsed) ?? config.procTrack;
  if (!config.runtimePlugins.includes(config.defRuntimePlugin) && v.DefRuntimePlugin !== undefined) {
    throw confError(
      parsed.where.DefRuntimePlugin!,
      "DefRuntimePlugin",
      `${config.defRuntimePlugin} is not in RuntimePlugins (${config.runtimePlugins.join(",")})`,
    );
  }
  return config;
}
