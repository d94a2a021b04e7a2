/**
 * What the host hands a runtime for `--container-device` (docs/devices.md): the CDI specs' edits
 * for the devices of this step, already resolved and checked on the host. A runtime applies them;
 * it never reads a CDI spec itself ("the host resolves, runtimes apply").
 * Since core 2.1.0.
 */
export interface DeviceEdits {
  /** The CDI fully-qualified names resolved (`vendor.com/class=name`), in request order. */
  devices: string[];
  deviceNodes: DeviceNodeEdit[];
  mounts: DeviceMountEdit[];
  /** `NAME=VALUE`, applied after the job's environment (CDI: appended to the container's). */
  env: string[];
  /** Groups added to the container process (0 is never listed). */
  additionalGids: number[];
  hooks: DeviceHookEdit[];
  /** CDI `intelRdt`: the container's resctrl class (OCI `linux.intelRdt`); the last edit's wins. */
  intelRdt?: DeviceIntelRdtEdit;
  /**
   * The host's namespaces the container shares instead of making its own: what the host asks for a
   * step with MPI wire-up, so that ranks reach Slurm's PMIx server and each other over the host's
   * network and share memory on a node (docs/mpi.md). Not a CDI field. Since core 2.1.0.
   */
  hostNamespaces?: HostNamespace[];
}

/** The namespaces a container can share with the host (OCI `linux.namespaces` types). Since core 2.1.0. */
export const HOST_NAMESPACES = ["network", "ipc", "pid", "uts"] as const;
/** Since core 2.1.0. */
export type HostNamespace = (typeof HOST_NAMESPACES)[number];

/** CDI `intelRdt`, field for field as the OCI runtime spec's `linux.intelRdt`. Since core 2.1.0. */
export interface DeviceIntelRdtEdit {
  /** The resctrl class (a directory name under /sys/fs/resctrl). */
  closID?: string;
  l3CacheSchema?: string;
  memBwSchema?: string;
  enableCMT?: boolean;
  enableMBM?: boolean;
}

/** One device node; type, major and minor are the host node's, taken with stat on the host. Since core 2.1.0. */
export interface DeviceNodeEdit {
  /** Path inside the container. */
  path: string;
  /** The node on the host the numbers were taken from. */
  hostPath: string;
  type: "c" | "b";
  major: number;
  minor: number;
  /** Cgroup access, a non-empty subset of `rwm` in that order. */
  permissions: string;
  fileMode?: number;
  uid?: number;
  gid?: number;
}

/** Since core 2.1.0. */
export interface DeviceMountEdit {
  hostPath: string;
  containerPath: string;
  type?: string;
  options: string[];
  /**
   * Why the host added it, when no CDI device asked for it (`MPI wire-up (PMIX_SERVER_TMPDIR)`):
   * what a runtime that cannot apply it names in its refusal instead of `--container-device`.
   * Since core 2.1.0.
   */
  reason?: string;
}

/** An OCI runtime hook (CDI `hooks`): `hookName` is the OCI lifecycle point. Since core 2.1.0. */
export interface DeviceHookEdit {
  hookName: DeviceHookName;
  path: string;
  args?: string[];
  env?: string[];
  timeout?: number;
}

/** Since core 2.1.0. */
export const DEVICE_HOOK_NAMES = [
  "prestart",
  "createRuntime",
  "createContainer",
  "startContainer",
  "poststart",
  "poststop",
] as const;
/** Since core 2.1.0. */
export type DeviceHookName = (typeof DEVICE_HOOK_NAMES)[number];
