import { accessSync, constants, lstatSync, readdirSync, readlinkSync, statSync, statfsSync } from "node:fs";
import type { CheckFinding } from "@jobrt/core";

/** statfs f_type of a tmpfs (linux/magic.h TMPFS_MAGIC). */
const TMPFS_MAGIC = 0x01021994;
/** Below this, Open MPI's and MPICH's per-node shared-memory segments do not fit a few ranks. */
const SHM_MIN = 64 * 1024 * 1024;

const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`;

function readlinkOr(path: string): string | undefined {
  try {
    return readlinkSync(path);
  } catch {
    return undefined;
  }
}

/** Whether `path` is the same mount as init's `path` (PID 1's root), when this process may look there. */
function sameAsInit(path: string): boolean | undefined {
  try {
    return statSync(path).dev === statSync(`/proc/1/root${path}`).dev;
  } catch {
    return undefined;
  }
}

/** /dev/shm as this process sees it: its size, tmpfs or not, and whether it is the node's own. */
export function shmFinding(): CheckFinding {
  const subject = "/dev/shm";
  let fs: ReturnType<typeof statfsSync>;
  try {
    fs = statfsSync("/dev/shm");
  } catch {
    return {
      subject,
      status: "failed",
      detail: "not on this node: MPI's shared-memory transport between ranks fails; fix: mount a tmpfs at /dev/shm",
    };
  }
  const size = fs.blocks * fs.bsize;
  if (fs.type !== TMPFS_MAGIC)
    return {
      subject,
      status: "failed",
      detail: `not a tmpfs (filesystem type 0x${fs.type.toString(16)}): shared-memory segments would not be in memory; fix: mount a tmpfs at /dev/shm`,
    };
  if (size < SHM_MIN)
    return {
      subject,
      status: "failed",
      detail: `a tmpfs of only ${(size / 1024 ** 2).toFixed(0)} MiB: MPI's shared-memory segments do not fit; fix: a larger one (mount -o remount,size=50% /dev/shm)`,
    };
  const node = sameAsInit("/dev/shm");
  const whose =
    node === undefined
      ? "whether it is the node's is not readable here (/proc/1/root)"
      : node
        ? "the node's"
        : "not the node's (this job's own, e.g. job_container/tmpfs)";
  return { subject, status: "ok", detail: `tmpfs, ${gib(size)} (${gib(fs.bavail * fs.bsize)} free), ${whose}` };
}

/** The initial user namespace's inode (PROC_USER_INIT_INO, include/linux/proc_ns.h): the same on every Linux. */
const INIT_USER_NS = "user:[4026531837]";

/**
 * This process's user namespace: the node's own (the initial one, which needs no look at init's
 * /proc entry, unreadable to a job user) or one of its own, and whether it is its parent's.
 */
export function userNamespaceFinding(): CheckFinding {
  const subject = "user namespace";
  const own = readlinkOr("/proc/self/ns/user");
  if (own === undefined) return { subject, status: "unchecked", detail: "/proc/self/ns/user is not readable" };
  if (own === INIT_USER_NS) return { subject, status: "ok", detail: `${own}, the node's (the initial one)` };
  const parent = readlinkOr(`/proc/${process.ppid}/ns/user`);
  const whose =
    parent === undefined
      ? "its parent's is not readable to compare"
      : own === parent
        ? "the same as its parent's"
        : "not its parent's";
  return { subject, status: "ok", detail: `${own}, not the node's (a user namespace of its own); ${whose}` };
}

function listed(dir: string, prefix: string): string[] {
  try {
    return readdirSync(dir)
      .filter((n) => n.startsWith(prefix))
      .sort()
      .map((n) => `${dir}/${n}`);
  } catch {
    return [];
  }
}

/** The fabric devices this node has: InfiniBand/RoCE verbs, HPE Slingshot (cxi), Omni-Path (hfi1). */
export function fabricFinding(): CheckFinding {
  const found = [...listed("/dev/infiniband", ""), ...listed("/dev", "cxi"), ...listed("/dev", "hfi1")];
  if (found.length === 0)
    return {
      subject: "fabric devices",
      status: "ok",
      detail: "none on this node (no /dev/infiniband/*, /dev/cxi*, /dev/hfi1*): ranks on different nodes use TCP",
    };
  return { subject: "fabric devices", status: "ok", detail: found.join(", ") };
}

/**
 * A PMIx directory Slurm named: a directory this process can search and read, as the PMIx client in
 * the task must. The last component is not followed (lstat): a symlink there is reported, not used.
 */
export function pmixDirFinding(
  variable: string,
  path: string | undefined,
  required: boolean,
): CheckFinding | undefined {
  const subject = variable;
  if (path === undefined)
    return required
      ? {
          subject,
          status: "failed",
          detail: "not set: srun --mpi=pmix sets it; a wrapper between srun and jobrt dropped it",
        }
      : undefined;
  let isDir: boolean;
  try {
    const st = lstatSync(path);
    if (st.isSymbolicLink()) return { subject, status: "unchecked", detail: `${path} is a symlink (not followed)` };
    isDir = st.isDirectory();
  } catch {
    return {
      subject,
      status: "failed",
      detail: `${path}: no such directory on this node; fix: SlurmdSpoolDir / TmpFS must exist on every node`,
    };
  }
  if (!isDir) return { subject, status: "failed", detail: `${path} is not a directory` };
  try {
    accessSync(path, constants.R_OK | constants.X_OK);
  } catch {
    return {
      subject,
      status: "failed",
      detail: `${path}: this user cannot read and search it, so the PMIx client cannot reach its server`,
    };
  }
  return { subject, status: "ok", detail: `${path}: a directory this user can reach` };
}
