import { pmiDescriptor } from "@jobrt/launcher";

/** Which of Slurm's MPI wire-ups a step has (docs/mpi.md, "What Slurm gives a task"). */
export type WireupKind = "pmi2" | "pmix" | "none";

export interface Wireup {
  /** SLURM_JOB_ID and SLURM_STEP_ID are both set: this process is a task of a Slurm step. */
  inStep: boolean;
  kind: WireupKind;
  /** `SLURM_MPI_TYPE` as srun set it (`--mpi=` or slurm.conf's `MpiDefault`). */
  mpiType: string | undefined;
  /** The PMI-2 socket `PMI_FD` names, when it is one. */
  pmiFd: number | undefined;
  /** Why `PMI_FD` is not a usable socket: the line `jobrt exec` would refuse the step with. */
  pmiProblem: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
}

function kindOf(env: Readonly<Record<string, string | undefined>>, mpiType: string | undefined): WireupKind {
  if (mpiType?.startsWith("pmix")) return "pmix";
  if (mpiType === "pmi2" || mpiType === "pmi1") return "pmi2";
  if (env.PMI_FD !== undefined) return "pmi2";
  if (env.PMIX_NAMESPACE !== undefined || env.PMIX_RANK !== undefined) return "pmix";
  return "none";
}

/**
 * The wire-up as this process inherited it. Called before jobrt opens any descriptor of its own:
 * a `PMI_FD` naming no socket could otherwise be taken for one jobrt opened at that number
 * (launcher's pmiDescriptor says why only "open now" can be checked).
 */
export function captureWireup(env: Readonly<Record<string, string | undefined>>): Wireup {
  const defined = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
  const mpiType = env.SLURM_MPI_TYPE;
  let pmiFd: number | undefined;
  let pmiProblem: string | undefined;
  try {
    pmiFd = pmiDescriptor(defined);
  } catch (error) {
    pmiProblem = (error as Error).message;
  }
  return {
    inStep: env.SLURM_JOB_ID !== undefined && env.SLURM_STEP_ID !== undefined,
    kind: kindOf(env, mpiType),
    mpiType,
    pmiFd,
    pmiProblem,
    env,
  };
}
