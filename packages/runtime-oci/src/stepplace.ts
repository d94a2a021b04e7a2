import { isAbsolute, join } from "node:path";
import { type NodeConf, type StepRecord, type TaskRecord, jobrtError } from "@jobrt/core";
import type { OciConf } from "./conf.js";
import { stepContainerId } from "./containername.js";
import { expandPath } from "./expand.js";
import type { StepState } from "./ocistepstate.js";
import type { PatternValues } from "./pattern.js";

/** `%s` as Slurm prints it: the reserved step numbers for batch, interactive and extern steps. */
export function printedStepId(step: Pick<StepRecord, "kind" | "stepId">): number {
  switch (step.kind) {
    case "batch":
      return 4294967291;
    case "interactive":
      return 4294967290;
    case "extern":
      return 4294967292;
    default:
      return step.stepId;
  }
}

/** The step spool dir's name (runtime-oci.md, Lifecycle): oci-job<J>-{batch|interactive|extern|<S>}. */
export function stepDirName(step: Pick<StepRecord, "kind" | "stepId" | "jobId">): string {
  const suffix = step.kind === "normal" ? String(step.stepId) : step.kind;
  return `oci-job${step.jobId}-${suffix}`;
}

/** A step's pattern values and its spool dir (in ContainerPath, or SpoolDir), as setup works them out. */
export function stepPlace(
  node: NodeConf,
  step: StepRecord,
  conf: OciConf,
  bundle: string,
  rootfs: string,
): { base: PatternValues; stepDir: string } {
  const stepId = printedStepId(step);
  const containerId = stepContainerId(step, node.nodeName, stepId);
  const base: PatternValues = {
    jobId: step.jobId,
    stepId,
    nodeName: node.nodeName,
    user: step.user,
    uid: step.uid,
    cwd: step.cwd,
    bundle,
    rootfs,
    containerId,
  };
  let parent = node.spoolDir;
  if (conf.containerPath !== undefined) {
    parent = expandPath(conf, "ContainerPath", conf.containerPath, base);
    if (!isAbsolute(parent))
      throw jobrtError(
        "ERR_CONF",
        {
          where: conf.file,
          problem: `ContainerPath expands to ${JSON.stringify(parent)}, which is not an absolute path`,
        },
        { details: { file: conf.file, key: "ContainerPath" } },
      );
  }
  const stepDir = join(parent, stepDirName(step));
  base.stepDir = stepDir;
  return { base, stepDir };
}

/** A task's spool dir, in the step's: made before its container, so its absence means no container. */
export const taskDirOf = (st: StepState, task: TaskRecord) => join(st.stepDir, `task-${task.localId}`);
