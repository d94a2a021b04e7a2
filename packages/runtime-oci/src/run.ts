import { join } from "node:path";
import {
  type ExecSpec,
  type MissingCommandCheck,
  NOT_SUPPORTED,
  type NodeConf,
  type NotSupported,
  type StepRecord,
  type TaskHookContext,
  type TaskRecord,
  jobrtError,
} from "@jobrt/core";
import { type BundleConfig, type OciConfig, rewriteConfig } from "./bundle.js";
import { supervisorExec } from "./createstartexec.js";
import { withMpiNamespaces } from "./devices.js";
import { filterEnvStrings, formatEnvFile, envStrings, mergeBundleEnv } from "./env.js";
import { expandCommand, expandPath } from "./expand.js";
import { type FileOp, runFileOps } from "@jobrt/host-services";
import { imageArgs, imageHasMountPoint } from "./image/request.js";
import { missingCommandCheck } from "./missingcommand.js";
import { cannotPass, withPassedFds } from "./passedfds.js";
import { refuseBytesNotUtf8 } from "./notutf8.js";
import { type OciStepState, type StepState, stateFromJson } from "./ocistepstate.js";
import { type PatternValues, expandPattern } from "./pattern.js";
import { runScript } from "./shell.js";
import { spoolMountProblem } from "./spoolmount.js";
import { taskDirOf } from "./stepplace.js";
import { type TaskState, commandContext } from "./taskstate.js";
import { requestError } from "./validate.js";

/** The run hook: writes the task's files, then hands the host the command that runs its container. */
export async function run({
  node,
  step,
  task,
  state,
}: TaskHookContext<OciStepState>): Promise<ExecSpec | NotSupported> {
  const st = stateFromJson(state, step);
  if (!st) return NOT_SUPPORTED;
  // Before any file is written: a conf that cannot carry them refuses the whole task.
  if (task.passedFds && !st.conf.runArgv) throw cannotPass(st.conf);
  const taskDir = taskDirOf(st, task);
  refuseBytesNotUtf8(task, !st.request.clearEnv, st.request.env);
  const env = containerEnv(st, task);
  const { values, runtimeEnv } = commandContext(st, task, taskDir);
  const ts: TaskState = { task, taskDir, values, runtimeEnv };
  const check = await writeTaskFiles(node, step, st, ts, env);
  if (st.conf.mode === "run") return runModeSpec(node, step, st, ts, check);
  return createStartSpec(node, step, st, ts);
}

/**
 * The job env as the container sees it: task env (or nothing with --container-clearenv), the
 * bundle's env on top (Slurm's precedence), --container-env last, then EnvExclude.
 */
function containerEnv(st: StepState, task: TaskRecord): string[] {
  const { conf, request } = st;
  let env = request.clearEnv ? [] : envStrings(task.env);
  if (st.bundleConfig) env = mergeBundleEnv(env, st.bundleConfig.env);
  // The devices' env (CUDA_VISIBLE_DEVICES renumbered) over the host's; --container-env still wins.
  if (request.deviceEdits) env = mergeBundleEnv(env, request.deviceEdits.env);
  if (request.env.length > 0) env = mergeBundleEnv(env, request.env);
  return filterEnvStrings(env, conf.envExclude);
}

/**
 * Writes the task dir's config.json and environment file as the job user. In run mode, also how
 * the host checks the command config.json names after the runtime failed (missingcommand.ts).
 */
async function writeTaskFiles(
  node: NodeConf,
  step: StepRecord,
  st: StepState,
  ts: TaskState,
  env: string[],
): Promise<MissingCommandCheck | undefined> {
  const { conf } = st;
  const ops: FileOp[] = [];
  let check: MissingCommandCheck | undefined;
  if (st.bundleConfig) {
    const config = taskConfig(node, step, st, st.bundleConfig, ts, env);
    ops.push({
      op: "write",
      dir: ts.taskDir,
      name: "config.json",
      content: `${JSON.stringify(config, null, 2)}\n`,
      mode: 0o600,
    });
    if (conf.mode === "run") check = missingCommandCheck(config);
  }
  if (conf.createEnvFile !== "disabled") {
    const file = formatEnvFile(env, conf.createEnvFile);
    if (file.dropped.length > 0)
      node.log(
        "warn",
        `runtime oci: CreateEnvFile=newline cannot hold values with a line feed; left out: ${file.dropped.join(", ")}`,
      );
    ops.push({ op: "write", dir: ts.taskDir, name: "environment", content: file.content, mode: 0o600 });
  }
  const results = runFileOps(ops, st.identity);
  results.forEach((r, i) => {
    if (!r.ok) {
      const op = ops[i] as Extract<FileOp, { op: "write" }>;
      throw jobrtError(
        "ERR_LAUNCH",
        { problem: `cannot write ${join(op.dir, op.name)}: ${r.error}` },
        { details: { runtime: "runtime/oci", path: join(op.dir, op.name) } },
      );
    }
  });
  return check;
}

/** The bundle's config.json as this task's container gets it. */
function taskConfig(
  node: NodeConf,
  step: StepRecord,
  st: StepState,
  bundleConfig: BundleConfig,
  ts: TaskState,
  env: string[],
): OciConfig {
  const { conf, request } = st;
  const { task } = ts;
  // One warning per step record: its first task's.
  const destination = spoolMountDestination(node, st, ts.values, task.localId === step.tasks[0]?.localId);
  return rewriteConfig(bundleConfig.config, {
    terminal: step.pty,
    rootfs: st.rootfs,
    ...(destination !== undefined && spoolMountFits(node, st, destination)
      ? { spoolMount: { source: st.stepDir, destination } }
      : {}),
    extraMounts: st.mounts,
    disableHooks: conf.disableHooks,
    env,
    args: st.image ? imageArgs(bundleConfig.config, task.argv) : task.argv,
    ...(request.workdir !== undefined ? { cwd: request.workdir } : {}),
    ...(request.deviceEdits ? { devices: withMpiNamespaces(request.deviceEdits, conf) } : {}),
  });
}

/**
 * Run mode: the host runs RunTimeRun itself and, after the runtime failed, looks the task's
 * command up in the container (ExecSpec.supervise; docs/decisions.md, "The host supervises a
 * wrapper's task").
 */
function runModeSpec(
  node: NodeConf,
  step: StepRecord,
  st: StepState,
  ts: TaskState,
  check: MissingCommandCheck | undefined,
): ExecSpec {
  const { conf } = st;
  const { task, values, runtimeEnv } = ts;
  let spec: ExecSpec;
  if (conf.runArgv) {
    const words = conf.runArgv.map((word) => expandPattern(word, values, { shell: false }));
    const argv = withPassedFds(words, task.passedFds);
    node.log("debug", `runtime oci: task ${task.localId}: RunTimeRun: ${JSON.stringify(argv)}`);
    spec = { argv, env: runtimeEnv, cwd: step.cwd };
  } else {
    const command = expandCommand(st, "RunTimeRun", values);
    node.log("debug", `runtime oci: task ${task.localId}: RunTimeRun: ${command}`);
    spec = { argv: ["/bin/sh", "-c", runScript(command)], env: runtimeEnv, cwd: step.cwd, shell: true };
  }
  return check ? { ...spec, supervise: { missingCommand: check } } : spec;
}

/** Create/start mode: the supervisor runs the task (createstart.ts). */
function createStartSpec(node: NodeConf, step: StepRecord, st: StepState, ts: TaskState): ExecSpec {
  if (step.pty) {
    throw requestError(
      `--pty needs run mode: create/start would need a console socket that RunTimeCreate cannot be given; set RunTimeRun in ${st.conf.file}`,
      "--pty",
    );
  }
  // Check now that every command expands, so a bad pattern fails before anything starts.
  for (const key of ["RunTimeCreate", "RunTimeQuery"] as const) expandCommand(st, key, ts.values);
  return supervisorExec(node, step, st, ts, ts.values, ts.runtimeEnv);
}

/**
 * MountSpoolDir, when set and its mount point needs nothing created in the image (see
 * spoolmount.ts); otherwise no spool mount, with one warning per step when one was asked for.
 */
function spoolMountDestination(
  node: NodeConf,
  st: StepState,
  values: PatternValues,
  warn: boolean,
): string | undefined {
  const { conf } = st;
  if (!conf.mountSpool || conf.mountSpoolDir === undefined || !st.bundleConfig) return undefined;
  const destination = expandPath(conf, "MountSpoolDir", conf.mountSpoolDir, values);
  const problem = spoolMountProblem(st.rootfs, st.bundleConfig.config.mounts, destination);
  if (problem === undefined) return destination;
  if (warn) node.log("warn", `runtime oci: MountSpoolDir: the step spool dir is not mounted: ${problem}`);
  return undefined;
}

/** An image's shared rootfs takes the spool dir bind only where it has a mount point (imageHasMountPoint). */
function spoolMountFits(node: NodeConf, st: StepState, destination: string): boolean {
  if (!st.image || imageHasMountPoint(st.rootfs, destination)) return true;
  node.log(
    "verbose",
    `runtime oci: the image has no ${destination}: the spool dir is not mounted (set MountSpoolDir to a path under /tmp to have it)`,
  );
  return false;
}
