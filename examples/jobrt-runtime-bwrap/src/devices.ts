import { lstatSync } from "node:fs";
import { join } from "node:path";
import { type DeviceEdits, jobrtError } from "@jobrt/core";

/** The bwrap options for the host's CDI edits (docs/devices.md), and what bwrap cannot apply. */
export interface DeviceArgs {
  /** Binds of the device nodes and mounts, after the sandbox's own /dev. */
  binds: string[];
  /** `--setenv` of the edits' variables, before `--container-env` so that one wins. */
  env: string[];
  /** Edits bwrap cannot apply (hooks, extra groups), for the step's log. */
  skipped: string[];
}

/**
 * `reason`: the host's, for an edit no device asked for, named instead of the option; those are
 * the MPI wire-up's binds (docs/mpi.md), so their refusal is the wire-up's.
 */
function refuse(what: string, rule: string, reason?: string): Error {
  if (reason !== undefined)
    return jobrtError(
      "ERR_MPI_WIREUP",
      { problem: `the host's bind for ${reason}: ${what}: ${rule}` },
      { details: { runtime: "runtime/bwrap" } },
    );
  return jobrtError(
    "ERR_CONTAINER_REQUEST",
    { problem: `--container-device: ${what}: ${rule}` },
    { details: { runtime: "runtime/bwrap", key: "--container-device" } },
  );
}

/** bwrap makes a mount point itself only on its own tmpfs (/dev, /tmp); elsewhere the root is read-only. */
function checkTarget(root: string, path: string, what: string, reason?: string): void {
  if (path.startsWith("/dev/") || path.startsWith("/tmp/")) return;
  try {
    lstatSync(join(root, path));
  } catch {
    throw refuse(
      what,
      `the target ${path} does not exist in the sandbox (bwrap cannot create it on a read-only root)`,
      reason,
    );
  }
}

/**
 * The sandbox gets a fresh /dev (`--dev`), so a device node is there only when bound in: exactly
 * the nodes the host resolved for the step, each bound from its host node (`--dev-bind` keeps it
 * usable as a device). bwrap runs unprivileged: it has no device cgroup of its own, runs no OCI
 * hooks and cannot add groups.
 */
export function deviceArgs(edits: DeviceEdits | undefined, root: string): DeviceArgs {
  const out: DeviceArgs = { binds: [], env: [], skipped: [] };
  if (!edits) return out;
  for (const n of edits.deviceNodes) {
    checkTarget(root, n.path, `device node ${n.path}`);
    out.binds.push("--dev-bind", n.hostPath, n.path);
  }
  for (const m of edits.mounts) {
    if (m.type !== undefined && m.type !== "bind" && m.type !== "none")
      throw refuse(`mount ${m.containerPath}`, `a ${m.type} mount (bwrap applies bind mounts only)`);
    checkTarget(root, m.containerPath, `mount ${m.containerPath}`, m.reason);
    out.binds.push(m.options.includes("ro") ? "--ro-bind" : "--bind", m.hostPath, m.containerPath);
  }
  for (const e of edits.env) {
    const eq = e.indexOf("=");
    out.env.push("--setenv", e.slice(0, eq), e.slice(eq + 1));
  }
  if (edits.hooks.length > 0) out.skipped.push(`${edits.hooks.length} CDI hook(s) not run`);
  if (edits.additionalGids.length > 0) out.skipped.push(`groups ${edits.additionalGids.join(",")} not added`);
  if (edits.intelRdt) out.skipped.push("intelRdt (resctrl class) not set");
  return out;
}
