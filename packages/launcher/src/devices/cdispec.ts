import { isAbsolute } from "node:path";
import {
  DEVICE_HOOK_NAMES,
  type DeviceHookEdit,
  type DeviceIntelRdtEdit,
  type DeviceMountEdit,
  jobrtError,
} from "@jobrt/core";

/**
 * The CDI versions this reader knows (docs/devices.md): every released spec version up to 1.1.0.
 * A spec of a later version may carry edits we would silently drop, so it is refused.
 */
export const CDI_VERSIONS = ["0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"] as const;

/** A device node as a spec writes it, before the host's stat fills in its numbers. */
export interface SpecDeviceNode {
  path: string;
  hostPath?: string;
  permissions?: string;
  fileMode?: number;
  uid?: number;
  gid?: number;
  /** Where it is in the spec file, for errors (`devices[0].containerEdits.deviceNodes[1]`). */
  field: string;
}

/** A mount as a spec writes it, with where it is in the file (`containerEdits.mounts[0]`), for errors. */
export type SpecMount = DeviceMountEdit & { field: string };

export interface SpecEdits {
  env: string[];
  deviceNodes: SpecDeviceNode[];
  mounts: SpecMount[];
  hooks: DeviceHookEdit[];
  additionalGids: number[];
  intelRdt?: DeviceIntelRdtEdit;
}

export interface CdiSpec {
  file: string;
  kind: string;
  /** The spec-wide edits, applied once when any of its devices is used. */
  edits: SpecEdits;
  devices: { name: string; edits: SpecEdits }[];
}

const VENDOR_RE = /^[A-Za-z](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$/;
const CLASS_RE = /^[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?$/;
export const DEVICE_NAME_RE = /^[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?$/;

/** True when `kind` is `vendor.com/class` as CDI defines it. */
export function isCdiKind(kind: string): boolean {
  const slash = kind.indexOf("/");
  return (
    slash > 0 && kind.length <= 253 + 64 && VENDOR_RE.test(kind.slice(0, slash)) && CLASS_RE.test(kind.slice(slash + 1))
  );
}

/** One line naming the spec file and field: every spec problem is this. */
export function specError(file: string, field: string, problem: string): Error {
  return jobrtError(
    "ERR_DEVICE",
    { problem: `CDI spec ${file}: ${field}: ${problem}` },
    { details: { path: file, key: field } },
  );
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

class Fields {
  constructor(readonly file: string) {}
  fail(field: string, problem: string): never {
    throw specError(this.file, field, problem);
  }
  strings(v: unknown, field: string): string[] {
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v) || !v.every((s) => typeof s === "string")) this.fail(field, "must be a list of strings");
    return v as string[];
  }
  path(v: unknown, field: string): string {
    if (typeof v !== "string" || v === "") this.fail(field, "must be a path");
    if (!isAbsolute(v)) this.fail(field, `${JSON.stringify(v)} is not an absolute path`);
    return v;
  }
  uint(v: unknown, field: string, max = 0xffffffff): number | undefined {
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > max)
      this.fail(field, `${JSON.stringify(v)} is not a whole number from 0 to ${max}`);
    return v;
  }
}

function deviceNode(f: Fields, v: unknown, field: string): SpecDeviceNode {
  if (!isObj(v)) f.fail(field, "must be an object");
  const node: SpecDeviceNode = { path: f.path(v.path, `${field}.path`), field };
  if (v.hostPath !== undefined) node.hostPath = f.path(v.hostPath, `${field}.hostPath`);
  if (v.type !== undefined && !["b", "c", "u"].includes(v.type as string))
    f.fail(`${field}.type`, `${JSON.stringify(v.type)} is not a device type jobrt applies (b, c or u)`);
  for (const key of ["major", "minor"] as const) f.uint(v[key], `${field}.${key}`);
  if (v.permissions !== undefined) {
    if (typeof v.permissions !== "string" || !/^(?=.)r?w?m?$/.test(v.permissions))
      f.fail(`${field}.permissions`, `${JSON.stringify(v.permissions)} is not a non-empty subset of rwm in that order`);
    node.permissions = v.permissions;
  }
  const fileMode = f.uint(v.fileMode, `${field}.fileMode`, 0o7777);
  const uid = f.uint(v.uid, `${field}.uid`);
  const gid = f.uint(v.gid, `${field}.gid`);
  return {
    ...node,
    ...(fileMode !== undefined ? { fileMode } : {}),
    ...(uid !== undefined ? { uid } : {}),
    ...(gid !== undefined ? { gid } : {}),
  };
}

function mount(f: Fields, v: unknown, field: string): SpecMount {
  if (!isObj(v)) f.fail(field, "must be an object");
  const m: SpecMount = {
    hostPath: f.path(v.hostPath, `${field}.hostPath`),
    containerPath: f.path(v.containerPath, `${field}.containerPath`),
    options: f.strings(v.options, `${field}.options`),
    field,
  };
  if (v.type !== undefined) {
    if (typeof v.type !== "string") f.fail(`${field}.type`, "must be a string");
    m.type = v.type;
  }
  return m;
}

function hook(f: Fields, v: unknown, field: string): DeviceHookEdit {
  if (!isObj(v)) f.fail(field, "must be an object");
  if (!DEVICE_HOOK_NAMES.includes(v.hookName as never))
    f.fail(`${field}.hookName`, `${JSON.stringify(v.hookName)} is not one of ${DEVICE_HOOK_NAMES.join(", ")}`);
  const h: DeviceHookEdit = {
    hookName: v.hookName as DeviceHookEdit["hookName"],
    path: f.path(v.path, `${field}.path`),
  };
  if (v.args !== undefined) h.args = f.strings(v.args, `${field}.args`);
  if (v.env !== undefined) h.env = f.strings(v.env, `${field}.env`);
  if (v.timeout !== undefined) {
    if (typeof v.timeout !== "number" || !Number.isInteger(v.timeout) || v.timeout <= 0)
      f.fail(`${field}.timeout`, "must be a whole number of seconds above 0");
    h.timeout = v.timeout;
  }
  return h;
}

const RDT_STRINGS = ["closID", "l3CacheSchema", "memBwSchema"] as const;
const RDT_FLAGS = ["enableCMT", "enableMBM"] as const;

/**
 * `intelRdt` (CDI 0.7.0): a key jobrt does not know is refused rather than dropped, as a later
 * cdiVersion is (docs/devices.md, "The spec files").
 */
function intelRdt(f: Fields, v: unknown, field: string): DeviceIntelRdtEdit {
  if (!isObj(v)) f.fail(field, "must be an object");
  const out: DeviceIntelRdtEdit = {};
  for (const [key, value] of Object.entries(v)) {
    if (RDT_STRINGS.includes(key as never)) {
      if (typeof value !== "string") f.fail(`${field}.${key}`, "must be a string");
      out[key as (typeof RDT_STRINGS)[number]] = value;
    } else if (RDT_FLAGS.includes(key as never)) {
      if (typeof value !== "boolean") f.fail(`${field}.${key}`, "must be true or false");
      out[key as (typeof RDT_FLAGS)[number]] = value;
    } else
      f.fail(`${field}.${key}`, `not an intelRdt field jobrt applies (${[...RDT_STRINGS, ...RDT_FLAGS].join(", ")})`);
  }
  // resctrl makes the class as a directory of /sys/fs/resctrl.
  if (
    out.closID !== undefined &&
    (out.closID === "" || out.closID === "." || out.closID === ".." || out.closID.includes("/"))
  )
    f.fail(`${field}.closID`, `${JSON.stringify(out.closID)} is not a directory name`);
  return out;
}

function list<T>(f: Fields, v: unknown, field: string, item: (f: Fields, v: unknown, field: string) => T): T[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) f.fail(field, "must be a list");
  return v.map((x, i) => item(f, x, `${field}[${i}]`));
}

function edits(f: Fields, v: unknown, field: string): SpecEdits {
  if (v === undefined || v === null) return { env: [], deviceNodes: [], mounts: [], hooks: [], additionalGids: [] };
  if (!isObj(v)) f.fail(field, "must be an object");
  const env = f.strings(v.env, `${field}.env`);
  env.forEach((e, i) => {
    if (e.indexOf("=") <= 0) f.fail(`${field}.env[${i}]`, `${JSON.stringify(e)} is not NAME=VALUE`);
  });
  const gids = list(
    f,
    v.additionalGids ?? v.additionalGIDs,
    `${field}.additionalGids`,
    (g, x, at) => g.uint(x, at) as number,
  );
  return {
    env,
    deviceNodes: list(f, v.deviceNodes, `${field}.deviceNodes`, deviceNode),
    mounts: list(f, v.mounts, `${field}.mounts`, mount),
    hooks: list(f, v.hooks, `${field}.hooks`, hook),
    // CDI: "Values of 0 are ignored."
    additionalGids: gids.filter((g) => g !== 0),
    ...(v.intelRdt !== undefined && v.intelRdt !== null
      ? { intelRdt: intelRdt(f, v.intelRdt, `${field}.intelRdt`) }
      : {}),
  };
}

function document(text: string, file: string): unknown {
  try {
    return file.endsWith(".json") ? JSON.parse(text) : yamlParser()(text, { schema: "core" });
  } catch (error) {
    const first = ((error as Error).message.split("\n")[0] ?? "").trim();
    throw specError(file, file.endsWith(".json") ? "JSON" : "YAML", first);
  }
}

/**
 * The YAML parser, loaded the first time a YAML spec is read: most steps read none, and loading it
 * costs every `jobrt run`/`exec` start-up. Required rather than imported because the CLI's
 * code-cached steps script (a CommonJS vm.Script) may not import(); it resolves from the file that
 * holds this code (the launcher, or the CLI's bundle, which depends on yaml for it).
 */
function yamlParser(): typeof import("yaml").parse {
  // node:module itself is fetched here, not imported: jobrt's start-up never loads it (tests/cli/startup.test.ts).
  const { createRequire } = process.getBuiltinModule("node:module");
  return (createRequire(import.meta.url)("yaml") as typeof import("yaml")).parse;
}

/** Parses and checks one spec file's text (JSON for `.json`, YAML otherwise). */
export function parseCdiSpec(text: string, file: string): CdiSpec {
  const f: Fields = new Fields(file);
  const doc = document(text, file);
  if (!isObj(doc)) f.fail("(top level)", "must be an object");
  if (!CDI_VERSIONS.includes(doc.cdiVersion as never))
    f.fail(
      "cdiVersion",
      `${JSON.stringify(doc.cdiVersion)} is not a CDI version jobrt reads (${CDI_VERSIONS.join(", ")})`,
    );
  if (typeof doc.kind !== "string" || !isCdiKind(doc.kind))
    f.fail("kind", `${JSON.stringify(doc.kind)} is not vendor.com/class`);
  if (!Array.isArray(doc.devices) || doc.devices.length === 0) f.fail("devices", "must list at least one device");
  const names = new Set<string>();
  const devices = (doc.devices as unknown[]).map((d, i) => {
    const at = `devices[${i}]`;
    if (!isObj(d)) f.fail(at, "must be an object");
    if (typeof d.name !== "string" || !DEVICE_NAME_RE.test(d.name))
      f.fail(`${at}.name`, `${JSON.stringify(d.name)} is not a CDI device name`);
    if (names.has(d.name)) f.fail(`${at}.name`, `${JSON.stringify(d.name)} is listed twice`);
    names.add(d.name);
    return { name: d.name, edits: edits(f, d.containerEdits, `${at}.containerEdits`) };
  });
  return { file, kind: doc.kind, edits: edits(f, doc.containerEdits, "containerEdits"), devices };
}
