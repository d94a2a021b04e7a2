import type { StepRecord } from "@jobrt/core";
import type { OciConfig } from "./bundle.js";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Why a PMIx client in this container cannot reach Slurm's server (undefined: nothing seen). The
 * server accepts a client only with the job's uid, and a container in a user namespace of its own
 * (rootless runc) runs the task as another uid there, root as a rule: MPI_Init would then fail
 * with no word of why, so the step is refused before its container exists (docs/mpi.md).
 */
export function pmixUserProblem(config: OciConfig, step: Pick<StepRecord, "env" | "uid">): string | undefined {
  if (step.env.PMIX_NAMESPACE === undefined) return undefined;
  const linux = isObj(config.linux) ? config.linux : {};
  const ownUserNamespace =
    Array.isArray(linux.namespaces) && linux.namespaces.some((n) => isObj(n) && n.type === "user");
  const proc = isObj(config.process) ? config.process : {};
  const uid = isObj(proc.user) && typeof proc.user.uid === "number" ? proc.user.uid : 0;
  if (!ownUserNamespace || uid === step.uid) return undefined;
  return `runtime oci runs this task as uid ${uid} of its own user namespace (rootless runc), and Slurm's PMIx server refuses a client whose uid is not the job's (${step.uid}), so MPI_Init would fail: use srun --mpi=pmi2 (an MPI with PMI-2, such as MPICH), or --runtime none`;
}
