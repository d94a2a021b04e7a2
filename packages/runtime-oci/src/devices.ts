import type { DeviceEdits } from "@jobrt/core";
import type { OciConfig } from "./bundle.js";
import type { OciConf } from "./conf.js";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function child(parent: Obj, key: string): Obj {
  const v = parent[key];
  if (isObj(v)) return v;
  const made: Obj = {};
  parent[key] = made;
  return made;
}

function listIn(parent: Obj, key: string): unknown[] {
  const v = parent[key];
  if (Array.isArray(v)) return v;
  const made: unknown[] = [];
  parent[key] = made;
  return made;
}

/** A bundle's device rule that names one device (type c or b, a major and a minor): kept. */
function namesOneDevice(rule: unknown): boolean {
  if (!isObj(rule)) return false;
  return (
    (rule.type === "c" || rule.type === "b") &&
    typeof rule.major === "number" &&
    rule.major >= 0 &&
    typeof rule.minor === "number" &&
    rule.minor >= 0
  );
}

/**
 * The container's device rules when it is given devices (docs/devices.md, "Where only the
 * allocation is enforced"): deny everything first, then the bundle's rules that name one device,
 * then one allow rule per CDI device node. A bundle's wildcard rules (`allow: true` for every
 * device) are dropped, so an unallocated device node is refused even if it is bind-mounted in.
 */
function deviceRules(config: OciConfig, edits: DeviceEdits): void {
  const resources = child(child(config, "linux"), "resources");
  const kept = (Array.isArray(resources.devices) ? resources.devices : []).filter(namesOneDevice);
  const ours = edits.deviceNodes.map((n) => ({
    allow: true,
    type: n.type,
    major: n.major,
    minor: n.minor,
    access: n.permissions,
  }));
  resources.devices = [{ allow: false, access: "rwm" }, ...kept, ...ours];
}

/** A rootless bundle (a user namespace): runc cannot mknod there. */
function inUserNamespace(config: OciConfig): boolean {
  const namespaces = child(config, "linux").namespaces;
  return Array.isArray(namespaces) && namespaces.some((n) => isObj(n) && n.type === "user");
}

/**
 * In a user namespace runc cannot make device nodes, and it would bind-mount each from the same
 * path on the host (linux.devices has no host path): the host's node is bind-mounted at the
 * container path instead, as rootless podman does with CDI devices.
 */
function bindNodes(config: OciConfig, edits: DeviceEdits): void {
  const list = listIn(config, "mounts");
  for (const n of edits.deviceNodes)
    list.push({ destination: n.path, type: "none", source: n.hostPath, options: ["bind", "nosuid", "noexec"] });
}

function deviceNodes(config: OciConfig, edits: DeviceEdits): void {
  if (inUserNamespace(config)) {
    bindNodes(config, edits);
    return;
  }
  const linux = child(config, "linux");
  const paths = new Set(edits.deviceNodes.map((n) => n.path));
  const others = (Array.isArray(linux.devices) ? linux.devices : []).filter(
    (d) => !(isObj(d) && paths.has(d.path as string)),
  );
  const ours = edits.deviceNodes.map((n) => ({
    path: n.path,
    type: n.type,
    major: n.major,
    minor: n.minor,
    ...(n.fileMode !== undefined ? { fileMode: n.fileMode } : {}),
    ...(n.uid !== undefined ? { uid: n.uid } : {}),
    ...(n.gid !== undefined ? { gid: n.gid } : {}),
  }));
  linux.devices = [...others, ...ours];
}

function mounts(config: OciConfig, edits: DeviceEdits): void {
  const list = listIn(config, "mounts");
  for (const m of edits.mounts) {
    // A CDI mount without a type is a bind mount (what vendors' generators write for libraries).
    const options =
      m.type === undefined && !m.options.some((o) => o === "bind" || o === "rbind")
        ? ["rbind", ...m.options]
        : m.options;
    list.push({ destination: m.containerPath, type: m.type ?? "none", source: m.hostPath, options });
  }
}

function hooks(config: OciConfig, edits: DeviceEdits): void {
  for (const h of edits.hooks) {
    listIn(child(config, "hooks"), h.hookName).push({
      path: h.path,
      ...(h.args ? { args: h.args } : {}),
      ...(h.env ? { env: h.env } : {}),
      ...(h.timeout !== undefined ? { timeout: h.timeout } : {}),
    });
  }
}

function additionalGids(config: OciConfig, edits: DeviceEdits): void {
  if (edits.additionalGids.length === 0) return;
  const user = child(child(config, "process"), "user");
  const gids = listIn(user, "additionalGids");
  for (const g of edits.additionalGids) if (!gids.includes(g)) gids.push(g);
}

/** CDI `intelRdt` is OCI's `linux.intelRdt` field for field; it replaces the bundle's. */
function intelRdt(config: OciConfig, edits: DeviceEdits): void {
  if (edits.intelRdt) child(config, "linux").intelRdt = { ...edits.intelRdt };
}

/** The bundle's mounts the host's IPC namespace replaces: its own /dev/shm (the host's is bound by the edits) and mqueue. */
const IPC_MOUNTS = ["/dev/shm", "/dev/mqueue"];

/**
 * The host's namespaces in place of the bundle's own (edits.hostNamespaces, docs/mpi.md): their
 * entries leave linux.namespaces, and with the UTS namespace goes the bundle's hostname (runc
 * cannot set one there). In a user namespace of its own (rootless) a container cannot mount a
 * /proc for the host's PID namespace nor an mqueue for its IPC one, so it keeps its PID namespace
 * and loses its mqueue mount.
 */
function hostNamespaces(config: OciConfig, edits: DeviceEdits): void {
  const rootless = inUserNamespace(config);
  const shared: string[] = (edits.hostNamespaces ?? []).filter((n) => !(rootless && n === "pid"));
  if (shared.length === 0) return;
  const linux = child(config, "linux");
  const own = Array.isArray(linux.namespaces) ? linux.namespaces : [];
  linux.namespaces = own.filter((n) => !(isObj(n) && shared.includes(n.type as string)));
  if (shared.includes("uts")) delete config.hostname;
  if (shared.includes("ipc"))
    config.mounts = listIn(config, "mounts").filter((m) => !(isObj(m) && IPC_MOUNTS.includes(m.destination as string)));
}

/** (type, major, minor) of a rule that names one device. */
const deviceKey = (rule: Obj) => `${rule.type} ${rule.major}:${rule.minor}`;

/**
 * The container's device rules below a devices cgroup that refuses runc's whitelist
 * (devicecgroup.ts: Slurm's ConstrainDevices on cgroup v1). There a whitelist cannot start at all,
 * so the rules become a blacklist (docs/devices.md, "Where only the allocation is enforced"):
 * every device allowed, then each device the rules leave denied by name (its last rule denies it),
 * and every block device unless a rule allows one. runc then writes no allow rule, the container's
 * cgroup keeps the denials it inherits from the step's (the node's unallocated GPUs), and the
 * step's cgroup is the limit, as for every other runtime. Rootless runc sets no device rules.
 */
export function nestDeviceRules(config: OciConfig, refused: () => boolean): void {
  if (inUserNamespace(config) || !refused()) return;
  const resources = child(child(config, "linux"), "resources");
  const rules = (Array.isArray(resources.devices) ? resources.devices : []).filter(namesOneDevice) as Obj[];
  const last = new Map<string, Obj>();
  for (const rule of rules) last.set(deviceKey(rule), rule);
  const denied = [...last.values()].filter((r) => r.allow !== true);
  const blockAllowed = [...last.values()].some((r) => r.allow === true && r.type === "b");
  resources.devices = [
    { allow: true, access: "rwm" },
    ...(blockAllowed ? [] : [{ allow: false, type: "b", access: "rwm" }]),
    ...denied,
  ];
}

/**
 * Applies the host's resolved CDI edits to a task's config.json (in place): device nodes with their
 * cgroup rules, mounts, hooks, additional gids, the resctrl class. The edits' env goes into
 * process.env with the rest of the task's environment (plugin.ts).
 */
export function applyDeviceEdits(config: OciConfig, edits: DeviceEdits): void {
  hostNamespaces(config, edits);
  deviceNodes(config, edits);
  // Edits with no device (the MPI wire-up's alone) leave the bundle's device rules as they are.
  if (edits.devices.length > 0) deviceRules(config, edits);
  mounts(config, edits);
  hooks(config, edits);
  additionalGids(config, edits);
  intelRdt(config, edits);
}

/**
 * The edits as oci.conf's `MpiNamespaces` takes them: `bundle` declines the host's namespaces, so
 * each container keeps the bundle's own, as Slurm's containers do (docs/mpi.md says what MPI loses).
 */
export function withMpiNamespaces(edits: DeviceEdits, conf: Pick<OciConf, "mpiNamespaces">): DeviceEdits {
  if (conf.mpiNamespaces === "host" || edits.hostNamespaces === undefined) return edits;
  const { hostNamespaces: _declined, ...kept } = edits;
  return kept;
}
