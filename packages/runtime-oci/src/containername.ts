import { type ContainerRequest, type StepRecord, containerIdProblem, jobrtError } from "@jobrt/core";

/** `--container-id ID` (and `SLURM_CONTAINER_ID` under srun) travels in the request's options, as `--container-opt id=ID`. */
export const CONTAINER_ID_OPTION = "id";

/** The step's `--container-id`, checked; undefined when none was given. */
export function requestedContainerId(c: ContainerRequest): string | undefined {
  const v = c.options[CONTAINER_ID_OPTION];
  if (v === undefined || v.length === 0) return undefined;
  const problem = v.length > 1 ? "given twice" : containerIdProblem(v[0] as string);
  if (problem)
    throw jobrtError(
      "ERR_CONTAINER_REQUEST",
      { problem: `--container-id: ${problem}` },
      { details: { runtime: "runtime/oci", key: "--container-id" } },
    );
  return v[0];
}

/**
 * `%I`: the step's container id, or, without one, jobrt.NODE.UID.JOB.STEP (the embedded default
 * appends the task; runtime-oci.md, Patterns).
 */
export function stepContainerId(step: StepRecord, nodeName: string, printedStepId: number): string {
  const given = step.container ? requestedContainerId(step.container) : undefined;
  return given ?? `jobrt.${nodeName}.${step.uid}.${step.jobId}.${printedStepId}`;
}
