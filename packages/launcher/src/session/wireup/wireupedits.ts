import { type Stats, lstatSync } from "node:fs";
import { dirname, isAbsolute } from "node:path";
import {
  type DeviceEdits,
  type DeviceMountEdit,
  HOST_NAMESPACES,
  type HostNamespace,
  type JobrtError,
  type LoadedRuntime,
  type StepRecord,
  jobrtError,
} from "@jobrt/core";
import { untrustedPath } from "../../devices/rootpath.js";

/** Which of Slurm's MPI wire-ups a step has (docs/mpi.md, "What Slurm gives a task"). */
export type WireupKind = "pmi2" | "pmix" | "none";

/** The wire-up a task's environment names: `SLURM_MPI_TYPE` first, else the variables each plugin sets. */
export function wireupKind(env: Readonly<Record<string, string | undefined>>): WireupKind {
  const mpiType = env.SLURM_MPI_TYPE;
  if (mpiType?.startsWith("pmix")) return "pmix";
  if (mpiType === "pmi2" || mpiType === "pmi1") return "pmi2";
  if (env.PMI_FD !== undefined) return "pmi2";
  if (env.PMIX_NAMESPACE !== undefined || env.PMIX_RANK !== undefined) return "pmix";
  return "none";
}

/** The capability of a runtime whose tasks run in a sandbox of their own, not beside jobrt. */
export const CONTAINER_CAPABILITY = "container";

/** The PMIx server's directories a client must find at the same path: [variable, required]. */
const PMIX_DIRECTORIES = [
  ["PMIX_SERVER_TMPDIR", true],
  ["PMIX_SYSTEM_TMPDIR", false],
] as const;

function wireup(problem: string): JobrtError {
  return jobrtError("ERR_MPI_WIREUP", { problem });
}

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

/**
 * Why the directory `variable` names cannot be bound into a container (undefined: it can). As root
 * its parent must be a path only root may change: a job user who could swap the directory for a
 * symlink would have root's runtime bind whatever the link names (docs/mpi.md).
 */
function directoryProblem(variable: string, path: string, asRoot: boolean): string | undefined {
  if (!isAbsolute(path)) return `${variable}=${JSON.stringify(path)} is not an absolute path`;
  const st = lstatOrUndefined(path);
  if (st === undefined) return `${variable}=${path} does not exist`;
  if (!st.isDirectory()) return `${variable}=${path} is not a directory`;
  const parent = asRoot ? untrustedPath(dirname(path)) : undefined;
  return parent === undefined ? undefined : `${variable}=${path}: ${parent}`;
}

/** The binds of Slurm's PMIx directories (same path inside), outer ones first. */
function pmixMounts(env: Readonly<Record<string, string>>, asRoot: boolean): DeviceMountEdit[] {
  const paths = new Map<string, string[]>();
  for (const [variable, required] of PMIX_DIRECTORIES) {
    const path = env[variable];
    if (path === undefined) {
      if (required)
        throw wireup(`${variable} is not set: srun --mpi=pmix sets it; a wrapper between srun and jobrt dropped it`);
      continue;
    }
    const problem = directoryProblem(variable, path, asRoot);
    if (problem !== undefined) throw wireup(`${problem}, so the PMIx directories cannot be bound into the container`);
    const key = path.replace(/\/+$/, "") || "/";
    paths.set(key, [...(paths.get(key) ?? []), variable]);
  }
  return [...paths]
    .sort(([a], [b]) => a.length - b.length)
    .map(([p, variables]) => ({
      hostPath: p,
      containerPath: p,
      options: ["rbind", "rw", "nosuid", "nodev"],
      reason: `MPI wire-up (${variables.join(", ")})`,
    }));
}

function noRequest(runtime: string): JobrtError {
  return wireup(
    `runtime ${runtime} runs its tasks in a sandbox of its own, and a step without --container gives it no container request through which the host binds Slurm's PMIx directories, so MPI_Init would fail there: use --container, srun --mpi=pmi2, or --runtime none`,
  );
}

function emptyEdits(): DeviceEdits {
  return { devices: [], deviceNodes: [], mounts: [], env: [], additionalGids: [], hooks: [] };
}

/** What a step's MPI wire-up needs of a container: binds (same path inside) and the host's namespaces. */
export interface WireupEdits {
  mounts: DeviceMountEdit[];
  hostNamespaces: HostNamespace[];
}

/**
 * What a task's MPI wire-up needs in `runtime`'s container (docs/mpi.md): the host's network, IPC,
 * PID and UTS namespaces (Slurm's PMIx server listens on 127.0.0.1, ranks on other nodes are
 * reached over the host's fabric, a node's ranks share memory and CMA), the host's /dev/shm, and
 * under PMIx the server's directories at the same paths. Undefined when it needs nothing: no
 * wire-up, or a runtime whose tasks are host processes. A container runtime that applies no edits
 * (no `devices` in `meta.accepts`) is refused under PMIx, where the directories are not optional;
 * under PMI-2 its tasks still get the socket, and `jobrt check` says what they lack. So is, under
 * PMIx, a step without a container request (`hasContainer` false: bwrap on the host's tree), which
 * has nothing to carry the edits into the sandbox.
 */
export function wireupEdits(
  env: Readonly<Record<string, string>>,
  runtime: Pick<LoadedRuntime, "name" | "capabilities" | "accepts">,
  asRoot: boolean,
  hasContainer = true,
): WireupEdits | undefined {
  const kind = wireupKind(env);
  if (kind === "none" || !runtime.capabilities.includes(CONTAINER_CAPABILITY)) return undefined;
  if (kind === "pmix" && !hasContainer) throw noRequest(runtime.name);
  if (!runtime.accepts.includes("devices")) {
    if (kind === "pmi2") return undefined;
    throw wireup(
      `runtime ${runtime.name} cannot bind Slurm's PMIx directories into its containers (its meta.accepts has no "devices", the field through which the host's container edits reach a runtime), so MPI_Init would fail there: use srun --mpi=pmi2, or a runtime that accepts them`,
    );
  }
  const mounts = kind === "pmix" ? pmixMounts(env, asRoot) : [];
  mounts.push({
    hostPath: "/dev/shm",
    containerPath: "/dev/shm",
    options: ["rbind", "rw", "nosuid", "nodev"],
    reason: "MPI wire-up (shared memory)",
  });
  return { mounts, hostNamespaces: [...HOST_NAMESPACES] };
}

/**
 * Adds wireupEdits to each component's container edits (created when it has none); `runtime(i)` is
 * component i's. A component without a container request gets none, and under PMIx a container
 * runtime's is refused (wireupEdits).
 */
export function addWireupEdits(
  components: readonly { record: StepRecord }[],
  runtime: (i: number) => LoadedRuntime,
): void {
  const asRoot = process.geteuid?.() === 0;
  for (const [i, { record }] of components.entries()) {
    const container = record.container;
    const wanted = wireupEdits(record.tasks[0]?.env ?? record.env, runtime(i), asRoot, container !== undefined);
    if (!container || !wanted) continue;
    const edits = container.deviceEdits ?? emptyEdits();
    edits.mounts.push(...wanted.mounts);
    edits.hostNamespaces = wanted.hostNamespaces;
    container.deviceEdits = edits;
  }
}
