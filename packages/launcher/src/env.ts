import { type StepRecord, type TaskRecord, jobrtError } from "@jobrt/core";

/**
 * srun's --export: ALL (default) passes the whole environment; NONE passes nothing; otherwise a
 * comma list of NAME (copied) and NAME=value items, with ALL allowed as one item.
 */
export function exportEnvironment(spec: string, source: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  const copyAll = () => {
    for (const [k, v] of Object.entries(source)) if (v !== undefined) out[k] = v;
  };
  const items = spec.split(",").filter((s) => s !== "");
  if (items.length === 0)
    throw jobrtError("ERR_USAGE", { problem: "--export: empty value (use ALL, NONE or NAME[=value],...)" });
  if (items.length === 1 && items[0]!.toUpperCase() === "NONE") return out;
  for (const item of items) {
    const eq = item.indexOf("=");
    const name = eq < 0 ? item : item.slice(0, eq);
    if (eq < 0 && name.toUpperCase() === "ALL") {
      copyAll();
      continue;
    }
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw jobrtError("ERR_USAGE", { problem: `--export: ${JSON.stringify(name)} is not a variable name` });
    }
    if (eq < 0) {
      const v = source[name];
      if (v !== undefined) out[name] = v;
    } else {
      out[name] = item.slice(eq + 1);
    }
  }
  return out;
}

/**
 * The Slurm variables a task sees, with the names srun and slurmstepd use, so job scripts behave
 * the same under `jobrt run`. The list is documented in docs/cli.md.
 */
export function slurmTaskVariables(
  step: StepRecord,
  task: TaskRecord,
  nodeName: string,
  cpusOnNode: number,
): Record<string, string> {
  const vars: Record<string, string> = {
    SLURM_JOB_ID: String(step.jobId),
    SLURM_JOBID: String(step.jobId),
    SLURM_STEP_ID: String(step.stepId),
    SLURM_STEPID: String(step.stepId),
    SLURM_PROCID: String(task.globalId),
    SLURM_LOCALID: String(task.localId),
    SLURM_NODEID: String(step.nodeId),
    SLURM_NNODES: String(step.nnodes),
    SLURM_JOB_NUM_NODES: String(step.nnodes),
    SLURM_STEP_NUM_NODES: String(step.nnodes),
    SLURM_NTASKS: String(step.totalTasks),
    SLURM_NPROCS: String(step.totalTasks),
    SLURM_STEP_NUM_TASKS: String(step.totalTasks),
    SLURM_STEP_TASKS_PER_NODE: String(step.tasks.length),
    SLURMD_NODENAME: nodeName,
    SLURM_STEP_NODELIST: nodeName,
    SLURM_CPUS_ON_NODE: String(cpusOnNode),
    SLURM_RUNTIME: step.runtime,
    SLURM_JOB_UID: String(step.uid),
    SLURM_JOB_GID: String(step.gid),
    SLURM_JOB_USER: step.user,
    SLURM_SUBMIT_DIR: step.cwd,
  };
  if (step.container?.value !== undefined) vars.SLURM_CONTAINER = step.container.value;
  if (step.het) {
    vars.SLURM_HET_SIZE = String(step.het.size);
    vars.SLURM_HET_JOB_ID = String(step.jobId);
    vars.SLURM_HET_JOB_OFFSET = String(step.het.component);
    vars.SLURM_HET_JOB_TASK_OFFSET = String(step.het.taskOffset);
    vars.SLURM_HET_JOB_NTASKS = String(step.tasks.length);
  }
  return vars;
}
