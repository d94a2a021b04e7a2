import { lstatSync } from "node:fs";
import { join } from "node:path";
import { type DeviceEdits, jobrtError } from "@jobrt/core";
import { reject } from "./reject.js";
import type { ChRunRequest } from "./request.js";

const FIELD = "--container-device";

function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * ch-run binds the host's /dev into the container and binds only onto a target that exists
 * (the image is read-only, and it will not create one under a bind such as /dev): a path under
 * /dev must exist on the host, any other in the image.
 */
function checkTarget(image: string, path: string, devices: string, reason?: string): void {
  const where = path.startsWith("/dev/") ? "the host's /dev, which ch-run binds into the container" : "the image";
  if (exists(path.startsWith("/dev/") ? path : join(image, path))) return;
  const rule = `the target ${path} does not exist in ${where}, and ch-run cannot create it`;
  // A bind the host added for its own reason is not the devices' doing: it is the MPI wire-up's
  // (the only edits the host gives a reason, docs/mpi.md), which the task would lack in MPI_Init.
  if (reason !== undefined)
    throw jobrtError(
      "ERR_MPI_WIREUP",
      { problem: `the host's bind for ${reason}: ${rule} (make the directory in the image)` },
      { details: { runtime: "runtime/charliecloud" } },
    );
  throw reject(FIELD, devices, rule);
}

/**
 * Adds the host's CDI edits (docs/devices.md) to a ch-run request: a device node at its own host
 * path is already in the container (ch-run binds the host's /dev), any other node and every spec
 * mount is a `--bind`, the edits' env comes before `--container-env` (which wins). ch-run binds are
 * read-write (a spec's `ro` leaves the host's file permissions as the limit); it runs no OCI hooks
 * and adds no groups: those are returned, for the step's log.
 */
export function addDeviceEdits(request: ChRunRequest, edits: DeviceEdits | undefined): string[] {
  if (!edits) return [];
  const devices = edits.devices.join(",");
  for (const n of edits.deviceNodes) {
    if (n.path === n.hostPath && n.path.startsWith("/dev/")) continue;
    checkTarget(request.image, n.path, devices);
    request.binds.push({ source: n.hostPath, target: n.path });
  }
  for (const m of edits.mounts) {
    if (m.type !== undefined && m.type !== "bind" && m.type !== "none")
      throw reject(FIELD, devices, `mount ${m.containerPath} is a ${m.type} mount; ch-run applies bind mounts only`);
    checkTarget(request.image, m.containerPath, devices, m.reason);
    request.binds.push({ source: m.hostPath, target: m.containerPath });
  }
  const env = edits.env.map((e): [string, string] => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]);
  request.env = [...env, ...request.env];
  const skipped: string[] = [];
  if (edits.hooks.length > 0) skipped.push(`${edits.hooks.length} CDI hook(s) not run`);
  if (edits.additionalGids.length > 0) skipped.push(`groups ${edits.additionalGids.join(",")} not added`);
  if (edits.intelRdt) skipped.push("intelRdt (resctrl class) not set");
  return skipped;
}
