import { randomBytes } from "node:crypto";
import { linkSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { procStat } from "@jobrt/host-services";

/**
 * A lease on a shared directory that works on NFS and Lustre, where flock may be local to one
 * client or absent (docs/images.md, "The lock"). The lease is a file made by link(2) of a complete
 * private file, which is atomic on NFS: whoever links first holds it. It names its holder (node,
 * pid, process start time, boot id) and an expiry the holder pushes forward while it works. A
 * waiter takes it over when it expired, or at once when the holder ran on this node (same node
 * name) and is dead, or the node rebooted since. Takeover renames the lease aside (only one
 * renamer wins), so two waiters never both remove a new holder's lease.
 */
export interface Holder {
  node: string;
  pid: number;
  start: number;
  boot: string;
  /** ms since the epoch. */
  expires: number;
  token: string;
}

export interface Lease {
  file: string;
  holder: Holder;
  ttlMs: number;
}

function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "";
  }
}

export function readHolder(file: string): Holder | undefined {
  try {
    const h = JSON.parse(readFileSync(file, "utf8")) as Partial<Holder>;
    if (
      typeof h.node === "string" &&
      typeof h.pid === "number" &&
      typeof h.expires === "number" &&
      typeof h.token === "string"
    )
      return h as Holder;
  } catch {
    // gone, or torn by a crash of its writer: a torn lease is stale
  }
  return undefined;
}

/** Written beside the lease, then linked or renamed into place: the lease file is never partial. */
function writePrivate(file: string, holder: Holder): string {
  const tmp = join(dirname(file), `.${basename(file)}.${holder.token}.${randomBytes(4).toString("hex")}`);
  writeFileSync(tmp, `${JSON.stringify(holder)}\n`, { mode: 0o644 });
  return tmp;
}

/** Is the lease free to take: expired, torn, or held by a dead process on this node? */
export function isStale(holder: Holder | undefined, node: string, now = Date.now()): boolean {
  if (!holder) return true;
  if (holder.expires < now) return true;
  if (holder.node !== node) return false;
  // This node rebooted since: its holder is gone.
  if (holder.boot !== bootId()) return true;
  const st = procStat(holder.pid);
  return st === undefined || st.state === "Z" || st.startTime !== holder.start;
}

/** One attempt: the lease when we got it, else the holder that keeps it. */
export function tryLease(file: string, node: string, ttlMs: number): Lease | { heldBy: Holder | undefined } {
  const holder: Holder = {
    node,
    pid: process.pid,
    start: procStat(process.pid)?.startTime ?? 0,
    boot: bootId(),
    expires: Date.now() + ttlMs,
    token: randomBytes(8).toString("hex"),
  };
  const tmp = writePrivate(file, holder);
  try {
    linkSync(tmp, file);
    return { file, holder, ttlMs };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    unlinkSync(tmp);
  }
  const current = readHolder(file);
  if (isStale(current, node)) {
    const aside = `${file}.stale.${holder.token}`;
    try {
      renameSync(file, aside);
      unlinkSync(aside);
    } catch {
      // another waiter took it over first
    }
    return { heldBy: undefined };
  }
  return { heldBy: current };
}

/** Pushes the expiry forward; false when the lease is no longer ours (taken over). */
export function renewLease(lease: Lease): boolean {
  if (readHolder(lease.file)?.token !== lease.holder.token) return false;
  lease.holder = { ...lease.holder, expires: Date.now() + lease.ttlMs };
  renameSync(writePrivate(lease.file, lease.holder), lease.file);
  return true;
}

/** Gives the lease back if it is still ours. Never throws. */
export function releaseLease(lease: Lease): void {
  try {
    if (readHolder(lease.file)?.token === lease.holder.token) unlinkSync(lease.file);
  } catch {
    // gone
  }
}

/** Renews the lease every third of its time until stopped; `lost` is called once if it was taken over. */
export function keepLease(lease: Lease, lost: () => void): () => void {
  let gone = false;
  const timer = setInterval(
    () => {
      try {
        if (!gone && !renewLease(lease)) {
          gone = true;
          lost();
        }
      } catch {
        // the shared filesystem hiccuped: the next renewal tries again
      }
    },
    Math.max(50, Math.floor(lease.ttlMs / 3)),
  );
  return () => clearInterval(timer);
}
