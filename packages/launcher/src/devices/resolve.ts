import { type BigIntStats, statSync } from "node:fs";
import { type DeviceEdits, type DeviceNodeEdit, jobrtError } from "@jobrt/core";
import { type CdiDevice, type CdiRegistry, loadCdiRegistry } from "./cdiregistry.js";
import { DEVICE_NAME_RE, type SpecDeviceNode, type SpecEdits, isCdiKind, specError } from "./cdispec.js";
import { type GresAllocation, type GresMapping, gresAllocation } from "./gres.js";
import { untrustedHostPath } from "./rootpath.js";

/** jobrt.conf's device keys (docs/devices.md). */
export interface DeviceConf {
  /** CdiSpecDirs, lowest priority first. */
  specDirs: string[];
  /** CdiDefaultDevices: added to every container step (`KIND=gres` only where Slurm allocated some). */
  defaults: string[];
  /** CdiGresKind: the CDI kind Slurm's GPU GRES maps to. */
  gresKind: string;
  /** CdiGresMap: how an allocated GPU names its CDI device. */
  gresMap: GresMapping;
}

export const DEFAULT_DEVICE_CONF: Omit<DeviceConf, "specDirs"> = {
  defaults: [],
  gresKind: "nvidia.com/gpu",
  gresMap: "index",
};

function deviceError(problem: string): Error {
  return jobrtError("ERR_DEVICE", { problem }, { details: { key: "--container-device" } });
}

/** `KIND=NAME`, `KIND=all` or `KIND=gres` → the qualified names it means. */
function expand(
  request: string,
  registry: CdiRegistry,
  allocation: GresAllocation | undefined,
  conf: DeviceConf,
  isDefault: boolean,
): string[] {
  const eq = request.indexOf("=");
  const kind = request.slice(0, eq);
  const name = request.slice(eq + 1);
  if (eq <= 0 || !isCdiKind(kind) || !DEVICE_NAME_RE.test(name))
    throw deviceError(
      `--container-device ${JSON.stringify(request)}: not a CDI name (vendor.com/class=name, =all or =gres)`,
    );
  if (name === "gres") {
    if (kind !== conf.gresKind)
      throw deviceError(
        `--container-device ${request}: =gres applies to ${conf.gresKind} (jobrt.conf CdiGresKind), not ${kind}`,
      );
    if (!allocation || allocation.unset) {
      if (isDefault) return [];
      throw deviceError(
        `--container-device ${request}: this step has no GPU allocation (${allocation ? `Slurm set no ${allocation.source}: ask it for GPUs with --gres=gpu:N` : "neither SLURM_STEP_GPUS nor CUDA_VISIBLE_DEVICES is set"})`,
      );
    }
    return allocation.names;
  }
  // A spec's own device named "all" (nvidia-ctk writes one) would bypass the allocation check: =all
  // is always every other device of the kind.
  if (name === "all") {
    const all = [...registry.devices.keys(), ...registry.conflicts.keys()].filter(
      (q) => q.startsWith(`${kind}=`) && q !== `${kind}=all`,
    );
    if (all.length === 0)
      throw deviceError(`--container-device ${request}: no CDI spec describes a device of kind ${kind}`);
    return all.sort();
  }
  return [request];
}

function lookup(
  qualified: string,
  registry: CdiRegistry,
  allocation: GresAllocation | undefined,
  conf: DeviceConf,
): CdiDevice {
  const files = registry.conflicts.get(qualified);
  if (files)
    throw specError(
      files[files.length - 1] as string,
      "devices",
      `${qualified} is also described by ${files.slice(0, -1).join(", ")} (two specs of one directory claim one name)`,
    );
  const device = registry.devices.get(qualified);
  if (!device)
    throw deviceError(
      `--container-device ${qualified}: no CDI spec describes it (spec dirs: ${conf.specDirs.join(", ")})`,
    );
  if (allocation && qualified.startsWith(`${conf.gresKind}=`) && !allocation.names.includes(qualified)) {
    // Under Slurm a step allocated no GPU is allocated none, not unrestricted: without
    // ConstrainDevices nothing else keeps a root container from the node's GPUs (docs/devices.md).
    if (allocation.unset)
      throw deviceError(
        `--container-device ${qualified}: not allocated to this step (Slurm allocated it no GPU: ${allocation.source} is not set); ask Slurm for GPUs (--gres=gpu:N)`,
      );
    throw deviceError(
      `--container-device ${qualified}: not allocated to this step (${allocation.source} lists ${allocation.names.map((n) => n.slice(conf.gresKind.length + 1)).join(",") || "none"}); use ${conf.gresKind}=gres`,
    );
  }
  return device;
}

/** Linux's dev_t split (glibc's gnu_dev_major / gnu_dev_minor). */
function majorMinor(rdev: bigint): { major: number; minor: number } {
  return {
    major: Number(((rdev >> 8n) & 0xfffn) | ((rdev >> 32n) & ~0xfffn)),
    minor: Number((rdev & 0xffn) | ((rdev >> 12n) & ~0xffn)),
  };
}

/**
 * A spec's node with the host node's type and numbers: a node missing on the host is an error, and
 * so, as root, is one a job user could swap before runc makes it (rootpath.ts).
 */
function hostNode(node: SpecDeviceNode, file: string, asRoot: boolean): DeviceNodeEdit {
  const hostPath = node.hostPath ?? node.path;
  let st: BigIntStats;
  try {
    st = statSync(hostPath, { bigint: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw specError(
      file,
      node.field,
      `device node ${hostPath} ${code === "ENOENT" ? "does not exist on this node" : `cannot be read (${code})`}`,
    );
  }
  if (!st.isCharacterDevice() && !st.isBlockDevice())
    throw specError(file, node.field, `${hostPath} is not a device node`);
  const untrusted = asRoot ? untrustedHostPath("device node", hostPath) : undefined;
  if (untrusted !== undefined) throw specError(file, node.field, untrusted);
  const edit: DeviceNodeEdit = {
    path: node.path,
    hostPath,
    type: st.isCharacterDevice() ? "c" : "b",
    ...majorMinor(st.rdev),
    permissions: node.permissions ?? "rwm",
  };
  if (node.fileMode !== undefined) edit.fileMode = node.fileMode;
  if (node.uid !== undefined) edit.uid = node.uid;
  if (node.gid !== undefined) edit.gid = node.gid;
  return edit;
}

function addEdits(out: DeviceEdits, edits: SpecEdits, file: string, asRoot: boolean): void {
  for (const n of edits.deviceNodes) {
    const node = hostNode(n, file, asRoot);
    // One node per container path: a later edit of the same path replaces it (as CDI's own library does).
    out.deviceNodes = [...out.deviceNodes.filter((d) => d.path !== node.path), node];
  }
  for (const { field, ...m } of edits.mounts) {
    // Root runc binds the source: one a job user could retarget would give the container any host path.
    const untrusted = asRoot ? untrustedHostPath("mount source", m.hostPath) : undefined;
    if (untrusted !== undefined) throw specError(file, field, untrusted);
    out.mounts = [...out.mounts.filter((x) => x.containerPath !== m.containerPath), m];
  }
  out.env.push(...edits.env);
  for (const g of edits.additionalGids) if (!out.additionalGids.includes(g)) out.additionalGids.push(g);
  out.hooks.push(...edits.hooks);
  // CDI: a later intelRdt replaces an earlier one whole (one resctrl class per container).
  if (edits.intelRdt) out.intelRdt = edits.intelRdt;
}

/**
 * The host's side of `--container-device` (docs/devices.md): names → the CDI edits, checked
 * against the spec dirs, the host's device nodes and this step's Slurm allocation. Undefined when
 * no device is asked for. `env` is the step's environment (Slurm's variables).
 */
export function resolveDevices(
  requested: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  conf: DeviceConf,
  asRoot = process.getuid?.() === 0,
): DeviceEdits | undefined {
  if (requested.length === 0 && conf.defaults.length === 0) return undefined;
  const registry = loadCdiRegistry(conf.specDirs, asRoot);
  const allocation = gresAllocation(env, conf.gresKind, conf.gresMap);
  const names: string[] = [];
  for (const [i, request] of [...requested, ...conf.defaults].entries()) {
    for (const q of expand(request, registry, allocation, conf, i >= requested.length))
      if (!names.includes(q)) names.push(q);
  }
  if (names.length === 0) return undefined;
  const out: DeviceEdits = { devices: names, deviceNodes: [], mounts: [], env: [], additionalGids: [], hooks: [] };
  const specsDone = new Set<string>();
  for (const q of names) {
    const device = lookup(q, registry, allocation, conf);
    // CDI: a spec's own containerEdits apply once, when any of its devices is used.
    if (!specsDone.has(device.spec.file)) addEdits(out, device.spec.edits, device.spec.file, asRoot);
    specsDone.add(device.spec.file);
    addEdits(out, device.edits, device.spec.file, asRoot);
  }
  const gpus = names.filter((q) => q.startsWith(`${conf.gresKind}=`)).length;
  // The container sees its GPUs as 0..n-1 whatever their numbers on the node.
  if (gpus > 0) out.env.push(`CUDA_VISIBLE_DEVICES=${Array.from({ length: gpus }, (_, i) => i).join(",")}`);
  return out;
}
