import { mkdirSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ownV1Cgroup, realDirBelow } from "./cgroups.js";

/**
 * Would a cgroup v1 child of this process's devices cgroup refuse the whitelist runc gives every
 * container? runc adds `c *:* m` and `b *:* m` (mknod of any device) to the container's rules, and
 * the kernel refuses a child an allow rule that overlaps a device an ancestor denies, so under
 * Slurm's ConstrainDevices (which denies the node's unallocated GPUs in the step's devices cgroup)
 * a root container fails to start (docs/devices.md, "Where only the allocation is enforced").
 * Probed with a child cgroup made and removed here: only in a root-owned cgroup below the
 * hierarchy's root (the root is never restricted), never on cgroup v2 (whose eBPF rules nest).
 */
export function devicesCgroupRefusesWhitelist(): boolean {
  const own = ownV1Cgroup("devices");
  if (!own || own.dir === own.mount || !realDirBelow(own.mount, own.dir, 0)) return false;
  const probe = join(own.dir, `jobrt-devices-probe.${process.pid}.${Date.now()}`);
  try {
    mkdirSync(probe);
  } catch {
    return false;
  }
  try {
    writeFileSync(join(probe, "devices.deny"), "a");
    for (const rule of ["c *:* m", "b *:* m"]) writeFileSync(join(probe, "devices.allow"), rule);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  } finally {
    try {
      rmdirSync(probe);
    } catch {
      // Holds no process: only a concurrent rmdir of the parent could have taken it.
    }
  }
}
