import { JobrtError, type StepKind, type StepRecord } from "@jobrt/core";
import { StepCancel, type StepClaim, claimExecTask, currentUser, recordTaskPid, runStep, writeStepFile } from "@jobrt/launcher";
import { containerRequest, flag, one, parseCommandLine } from "../args.js";
import { EXEC_HELP } from "../help.js";
import { describeError } from "../errors.js";
import { createHost, finishStep, say } from "../host.js";
import { collectGarbage } from "./gc.js";
import { hetFromSlurm } from "../slurm-env.js";
import { trapSignals } from "./run.js";

const EXEC_OPTIONS = new Set([
  "runtime", "container", "container-volume", "container-module", "container-env", "container-workdir",
  "container-entrypoint", "container-clearenv", "container-opt", "verbose", "conf-dir", "help",
]);

/** Slurm's reserved step ids (printed unsigned in SLURM_STEP_ID). */
const SPECIAL_STEPS: Record<string, StepKind> = { "4294967291": "batch", "4294967292": "extern", "4294967290": "interactive" };

function intVar(env: NodeJS.ProcessEnv, names: string[], fallback?: number): number {
  for (const name of names) {
    const v = env[name];
    if (v === undefined || v === "") continue;
    if (!/^\d+$/.test(v)) throw new JobrtError("ERR_NOT_IN_SLURM_STEP", `exec: ${name}=${JSON.stringify(v)} is not a number`);
    return Number(v);
  }
  if (fallback !== undefined) return fallback;
  throw new JobrtError(
    "ERR_NOT_IN_SLURM_STEP",
    `exec: not inside a Slurm job step (${names.join("/")} is not set); run it as 'srun ... jobrt exec ...', or use 'jobrt run' outside Slurm`,
  );
}

/** Builds the one-task StepRecord of this Slurm task from its environment. */
export function stepFromSlurm(env: NodeJS.ProcessEnv, argv: string[], runtime: string): StepRecord {
  const jobId = intVar(env, ["SLURM_JOB_ID", "SLURM_JOBID"]);
  const stepText = env.SLURM_STEP_ID ?? env.SLURM_STEPID ?? "";
  const stepId = intVar(env, ["SLURM_STEP_ID", "SLURM_STEPID"]);
  const globalId = intVar(env, ["SLURM_PROCID"]);
  const localId = intVar(env, ["SLURM_LOCALID"], 0);
  const me = currentUser();
  const taskEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) taskEnv[k] = v;
  if (runtime) taskEnv.SLURM_RUNTIME = runtime;
  const record: StepRecord = {
    jobId,
    stepId,
    kind: SPECIAL_STEPS[stepText] ?? "normal",
    runtime,
    uid: me.uid,
    gid: me.gid,
    user: env.SLURM_JOB_USER ?? me.user,
    home: env.HOME ?? me.home,
    cwd: process.cwd(),
    argv,
    env: taskEnv,
    tasks: [{ localId, globalId, argv: [...argv], env: taskEnv }],
    totalTasks: intVar(env, ["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"], 1),
    nodeId: intVar(env, ["SLURM_NODEID"], 0),
    nnodes: intVar(env, ["SLURM_STEP_NUM_NODES", "SLURM_NNODES"], 1),
    pty: false,
  };
  const het = hetFromSlurm(env);
  if (het) record.het = het;
  return record;
}

export async function execCommand(args: string[]): Promise<number> {
  const parsed = parseCommandLine(args, { allowed: EXEC_OPTIONS, components: false, needCommand: !args.includes("--help") && !args.includes("-h"), command: "exec" });
  if (flag(parsed.step, "help")) {
    process.stdout.write(EXEC_HELP);
    return 0;
  }
  const verbose = parsed.step.get("verbose")?.length ?? 0;
  const c = parsed.components[0]!;
  const host = createHost(one(parsed.step, "conf-dir"), verbose);
  const runtime = one(c.options, "runtime") ?? (process.env.SLURM_RUNTIME || process.env.SRUN_RUNTIME || "");
  const record = stepFromSlurm(process.env, c.argv, runtime);
  const container = containerRequest(c.options);
  if (container) record.container = container;
  if (process.env.SLURMD_NODENAME) host.node.nodeName = process.env.SLURMD_NODENAME;
  const cancel = new StepCancel();
  const untrap = trapSignals(cancel);
  await collectGarbage(host, true);
  // Best effort: a job user may not be able to write SpoolDir/jobs (root's); then there is no
  // record, and only Slurm's own cleanup and the runtime's stand behind this task.
  let claim: StepClaim | undefined;
  try {
    claim = claimExecTask(host.node.spoolDir, record.jobId, record.stepId, record.tasks[0]!.globalId);
  } catch (error) {
    host.log("verbose", `no crash record for this task: ${(error as Error).message}`);
  }
  try {
    const result = await runStep([{ record, io: {} }], {
      beforeSetup: (components) => {
        if (claim) writeStepFile(claim.dir, components.map((c) => c.record));
      },
      onEvent: (e) => {
        if (claim && e.event === "task-start" && typeof e.pid === "number") recordTaskPid(claim.dir, e.pid);
      },
      registry: host.registry,
      node: host.node,
      cancel,
      client: { verbose },
      report: say,
      describeError: (e) => describeError(e, verbose),
    });
    return await finishStep(host, result.status);
  } finally {
    claim?.release();
    untrap();
  }
}
