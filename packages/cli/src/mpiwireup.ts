import { type WireupKind, pmiDescriptor, wireupKind } from "@jobrt/launcher";

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

/**
 * The wire-up as this process inherited it. Called before jobrt opens any descriptor of its own:
 * a `PMI_FD` naming no socket could otherwise be taken for one jobrt opened at that number
 * (launcher's pmiDescriptor says why only "open now" can be checked).
 */
export function captureWireup(env: Readonly<Record<string, string | undefined>>): Wireup {
  const defined = definedEnv(env);
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
    kind: wireupKind(env),
    mpiType,
    pmiFd,
    pmiProblem,
    env,
  };
}

/** The variables of `env` that are set. */
export function definedEnv(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
}
