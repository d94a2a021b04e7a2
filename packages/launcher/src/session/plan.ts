import { type ContainerRequest, type StepKind, type StepRecord, type TaskRecord, jobrtError } from "@jobrt/core";
import { slurmTaskVariables } from "../env.js";
import type { UserIdentity } from "../users.js";
import { hetFromSlurm } from "./slurmenv.js";

/** One component of a (heterogeneous) step, as the user asked for it. */
export interface ComponentSpec {
  argv: string[];
  ntasks: number;
  runtime?: string;
  container?: ContainerRequest;
  cwd: string;
  /** The exported job environment (see exportEnvironment). */
  env: Record<string, string>;
  io: TaskIo;
}

/** srun's -l, -o, -e, -i for one component. */
export interface TaskIo {
  label?: boolean;
  output?: string;
  error?: string;
  /** "all" (default), "none", a task id, or a file pattern. */
  input?: string;
}

export interface StepSpec {
  jobId: number;
  stepId: number;
  kind?: StepKind;
  user: UserIdentity;
  components: ComponentSpec[];
}

/** A component ready to run: its StepRecord (what plugins see) and its stdio choices. */
export interface PlannedComponent {
  record: StepRecord;
  io: TaskIo;
}

/** The job env plus the Slurm task variables plus the user's identity. */
export function taskEnvironment(
  step: StepRecord,
  task: TaskRecord,
  nodeName: string,
  cpusOnNode: number,
): Record<string, string> {
  // Object.fromEntries, not an object spread or Object.assign (same keys, same order): a spread of
  // the exported environment (a dictionary-mode object) made V8 build ~33 KB of hidden classes per
  // task, and Object.assign gives a dictionary-mode object 5 times the size of one whose hidden
  // class all tasks share. Both outlived scavenges during a large step's launch and grew the young
  // generation (docs/performance.md, peak RSS).
  const identity: [string, string][] = [
    ["HOME", step.home],
    ["USER", step.user],
    ["LOGNAME", step.user],
  ];
  return Object.fromEntries([
    ...Object.entries(step.env),
    ...identity,
    ...Object.entries(slurmTaskVariables(step, task, nodeName, cpusOnNode)),
  ]);
}

/** Builds each component's StepRecord and tasks for `jobrt run` (global ids run across components). */
export function planStep(spec: StepSpec, nodeName: string, cpusOnNode: number): PlannedComponent[] {
  const total = spec.components.reduce((n, c) => n + c.ntasks, 0);
  let offset = 0;
  const het = spec.components.length > 1;
  return spec.components.map((c, index) => {
    const record: StepRecord = {
      jobId: spec.jobId,
      stepId: spec.stepId,
      kind: spec.kind ?? "normal",
      runtime: c.runtime ?? "",
      uid: spec.user.uid,
      gid: spec.user.gid,
      user: spec.user.user,
      home: spec.user.home,
      cwd: c.cwd,
      argv: [...c.argv],
      env: { ...c.env },
      tasks: [],
      totalTasks: total,
      nodeId: 0,
      nnodes: 1,
      pty: false,
      ...(het ? { het: { component: index, size: spec.components.length, taskOffset: offset } } : {}),
      ...(c.container ? { container: c.container } : {}),
    };
    for (let i = 0; i < c.ntasks; i++) {
      record.tasks.push({ localId: offset + i, globalId: offset + i, argv: [...c.argv], env: {} });
    }
    offset += c.ntasks;
    for (const task of record.tasks) task.env = taskEnvironment(record, task, nodeName, cpusOnNode);
    return { record, io: c.io };
  });
}

/** Slurm's reserved step ids (printed unsigned in SLURM_STEP_ID). */
const SPECIAL_STEPS: Record<string, StepKind> = {
  "4294967291": "batch",
  "4294967292": "extern",
  "4294967290": "interactive",
};

function intVar(env: NodeJS.ProcessEnv, names: string[], fallback?: number): number {
  for (const name of names) {
    const v = env[name];
    if (v === undefined || v === "") continue;
    if (!/^\d+$/.test(v))
      throw jobrtError("ERR_NOT_IN_SLURM_STEP", { problem: `${name}=${JSON.stringify(v)} is not a number` });
    return Number(v);
  }
  if (fallback !== undefined) return fallback;
  throw jobrtError("ERR_NOT_IN_SLURM_STEP", {
    problem: `not inside a Slurm job step (${names.join("/")} is not set); run it as 'srun ... jobrt exec ...', or use 'jobrt run' outside Slurm`,
  });
}

/**
 * Builds the one-task StepRecord of a Slurm task (`srun ... jobrt exec`) from its environment:
 * Slurm set the task variables already, so the task gets that environment as it is, plus
 * SLURM_RUNTIME and SLURM_CONTAINER as under `jobrt run`.
 */
export function planFromSlurm(
  env: NodeJS.ProcessEnv,
  argv: string[],
  runtime: string,
  user: UserIdentity,
  cwd: string,
  container?: ContainerRequest,
): StepRecord {
  const jobId = intVar(env, ["SLURM_JOB_ID", "SLURM_JOBID"]);
  const stepText = env.SLURM_STEP_ID ?? env.SLURM_STEPID ?? "";
  const stepId = intVar(env, ["SLURM_STEP_ID", "SLURM_STEPID"]);
  const globalId = intVar(env, ["SLURM_PROCID"]);
  const localId = intVar(env, ["SLURM_LOCALID"], 0);
  const taskEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) taskEnv[k] = v;
  if (runtime) taskEnv.SLURM_RUNTIME = runtime;
  if (container?.value !== undefined) taskEnv.SLURM_CONTAINER = container.value;
  const record: StepRecord = {
    jobId,
    stepId,
    kind: SPECIAL_STEPS[stepText] ?? "normal",
    runtime,
    uid: user.uid,
    gid: user.gid,
    user: env.SLURM_JOB_USER ?? user.user,
    home: env.HOME ?? user.home,
    cwd,
    argv,
    env: taskEnv,
    tasks: [{ localId, globalId, argv: [...argv], env: taskEnv }],
    totalTasks: intVar(env, ["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"], 1),
    nodeId: intVar(env, ["SLURM_NODEID"], 0),
    nnodes: intVar(env, ["SLURM_STEP_NUM_NODES", "SLURM_NNODES"], 1),
    pty: false,
    ...(container ? { container } : {}),
  };
  const het = hetFromSlurm(env);
  if (het) record.het = het;
  return record;
}
