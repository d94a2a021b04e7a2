import { jobrtError } from "./errors.js";
import { runtimeNameOf } from "./names.js";
import type { ContainerRequest } from "./requestoptions.js";

/**
 * Refuses, in one line, CDI edits the host resolved from jobrt.conf `CdiDefaultDevices` for a
 * runtime that does not list `devices` in `meta.accepts` (docs/devices.md): such a runtime would
 * run the step without the devices the site gives every step. A job's own `--container-device`
 * is refused earlier, by checkAccepted.
 * Since core 2.1.0.
 */
export function checkDevicesAccepted(
  type: string,
  accepts: readonly string[],
  request: ContainerRequest | undefined,
): void {
  const edits = request?.deviceEdits;
  if (!edits || accepts.includes("devices")) return;
  const runtime = runtimeNameOf(type);
  const names = edits.devices.join(", ");
  throw jobrtError(
    "ERR_CONTAINER_REQUEST",
    {
      problem: `jobrt.conf CdiDefaultDevices gives this step ${names}: runtime ${runtime} cannot apply devices (its meta.accepts has no devices): use a runtime that can (docs/devices.md)`,
    },
    { details: { runtime: type, key: "CdiDefaultDevices" } },
  );
}
