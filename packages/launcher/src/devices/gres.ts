import { jobrtError } from "@jobrt/core";

/**
 * Which CDI devices Slurm allocated to this step (docs/devices.md, "The mapping"): the GPU list
 * from the step's environment, each entry mapped to a CDI device name of the GRES kind.
 */
export type GresMapping = "index" | "uuid";

export interface GresAllocation {
  /** The variable the list came from. */
  source: string;
  /** Qualified CDI names, in Slurm's order. */
  names: string[];
}

/**
 * SLURM_STEP_GPUS holds the node's own GPU indices; CUDA_VISIBLE_DEVICES is the fallback, and
 * under ConstrainDevices=yes it is renumbered from 0, so a site that maps by index should rely on
 * SLURM_STEP_GPUS (Slurm sets it for every step with a GPU GRES). Undefined: no allocation known.
 */
export function gresAllocation(
  env: Readonly<Record<string, string | undefined>>,
  kind: string,
  mapping: GresMapping,
): GresAllocation | undefined {
  for (const source of ["SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"]) {
    const value = env[source];
    if (value === undefined) continue;
    const items =
      value === "NoDevFiles"
        ? []
        : value
            .split(",")
            .map((s) => s.trim())
            .filter((s) => s !== "");
    const names = items.map((item) => {
      if (mapping === "index" && !/^\d+$/.test(item))
        throw jobrtError("ERR_DEVICE", {
          problem: `${source}=${value}: ${JSON.stringify(item)} is not a GPU index (jobrt.conf CdiGresMap=index)`,
        });
      return `${kind}=${item}`;
    });
    return { source, names };
  }
  return undefined;
}
