import type { DeviceEdits } from "@jobrt/core";
import { type ShifterConf, confRef } from "./conf.js";
import { parseEnvEntries } from "./env.js";
import { parseModules } from "./modules.js";
import { reject } from "./reject.js";
import type { ShifterRequest } from "./request.js";
import type { UdiRootConf } from "./udiroot.js";

const FIELD = "--container-device";

/**
 * Shifter gives a container its GPUs through a site module (udiRoot.conf `module_gpu_*`: the
 * driver libraries by siteFs/copyPath, the root hook), and binds the host's /dev. So the host's
 * CDI edits (docs/devices.md) become: the module DeviceModules names for each device's kind,
 * added to `--module` (checked as a job's module is); the edits' env as `--env`, before
 * `--container-env`; each device node must sit at its own host path under /dev (there already).
 * The spec's mounts, hooks, groups and intelRdt are the module's to provide, not applied here.
 */
export function addDeviceModules(
  request: ShifterRequest,
  edits: DeviceEdits | undefined,
  conf: ShifterConf,
  udi: UdiRootConf | undefined,
): void {
  // Edits without a device are an MPI step's (docs/mpi.md): Shifter's tasks have the host's
  // namespaces already, and its binds are the site's modules' and siteFs's to give.
  if (!edits || edits.devices.length === 0) return;
  const modules: string[] = [];
  for (const name of edits.devices) {
    const kind = name.slice(0, name.indexOf("="));
    const module = Object.hasOwn(conf.deviceModules, kind) ? conf.deviceModules[kind] : undefined;
    if (module === undefined) {
      throw reject(
        FIELD,
        name,
        `${confRef(conf, "DeviceModules")} names no Shifter module for ${kind}: Shifter gives containers devices through site modules (docs/runtime-shifter.md, Devices)`,
      );
    }
    if (!modules.includes(module) && !request.modules.includes(module)) modules.push(module);
  }
  if (request.modules.includes("none"))
    throw reject(
      "--container-module",
      "none",
      `disables every module, and ${edits.devices.join(",")} needs module ${modules.join(",")}`,
    );
  for (const n of edits.deviceNodes) {
    if (n.path !== n.hostPath || !n.path.startsWith("/dev/")) {
      throw reject(
        FIELD,
        edits.devices.join(","),
        `device node ${n.path} (host ${n.hostPath}): shifter shows the host's /dev and can place no node elsewhere`,
      );
    }
  }
  request.modules = parseModules([...request.modules, ...modules], confRef(conf, "DeviceModules"), conf, udi);
  // --container-env wins over a device's variable; of a device's own repeats, the last (as CDI says).
  const own = new Set(request.env.map((e) => e.slice(0, e.indexOf("="))));
  const byName = new Map(edits.env.map((e) => [e.slice(0, e.indexOf("=")), e] as const));
  request.env = [
    ...parseEnvEntries(
      [...byName.values()].filter((e) => !own.has(e.slice(0, e.indexOf("=")))),
      FIELD,
    ),
    ...request.env,
  ];
}
