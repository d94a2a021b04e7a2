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
  /** Under Slurm, `source` was not set: Slurm allocated this step no GPU. */
  unset?: boolean;
}

/**
 * The variable that holds this step's GPUs. Under Slurm (SLURM_JOB_ID set) only slurmstepd's own:
 * it sets SLURM_STEP_GPUS for an srun step with GPUs and unsets it (and CUDA_VISIBLE_DEVICES) for
 * one without, while a SLURM_JOB_GPUS or CUDA_VISIBLE_DEVICES the job user exported reaches a
 * CPU-only step untouched; the batch step (no SLURM_STEP_ID) gets SLURM_JOB_GPUS instead.
 * Outside Slurm, CUDA_VISIBLE_DEVICES is the fallback (renumbered from 0 under
 * ConstrainDevices=yes, so a site that maps by index should rely on SLURM_STEP_GPUS).
 */
function sources(env: Readonly<Record<string, string | undefined>>): { names: string[]; slurm?: string } {
  if (env.SLURM_JOB_ID === undefined) return { names: ["SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"] };
  const own = env.SLURM_STEP_ID === undefined && env.SLURM_STEPID === undefined ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS";
  return { names: [own], slurm: own };
}

/** The step's GPUs as CDI names; undefined: no allocation known (outside Slurm, neither variable set). */
export function gresAllocation(
  env: Readonly<Record<string, string | undefined>>,
  kind: string,
  mapping: GresMapping,
): GresAllocation | undefined {
  const from = sources(env);
  for (const source of from.names) {
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
  return from.slurm === undefined ? undefined : { source: from.slurm, names: [], unset: true };
}
