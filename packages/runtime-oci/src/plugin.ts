import { existsSync, lstatSync, readFileSync, readdirSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import {
  type CheckContext,
  type CheckFinding,
  type CleanupContext,
  type ClientInfo,
  type ContainerRequest,
  type ExecSpec,
  type JobrtError,
  NOT_SUPPORTED,
  type NodeConf,
  type NotSupported,
  type RuntimeTool,
  type SetupContext,
  type StepRecord,
  type TaskHookContext,
  type TaskRecord,
  type ToolsContext,
  type ValidateContext,
  definePlugin,
  isJobrtError,
  messageOf,
  packageVersion,
  jobrtError,
} from "@jobrt/core";
import { type BundleConfig, type Mount, fitRootless, parseBundleConfig, parseVolume, rewriteConfig } from "./bundle.js";
import { hostCgroupDirs } from "./cgroups.js";
import { type CommandResult, runShellCommand } from "./command.js";
import { type OciConf, embeddedDefaultConf, findProgram, loadOciConf, userNamespacesAvailable } from "./conf.js";
import { type CreateStartSpec, PID_PLACEHOLDER, createStartArgv } from "./createstart.js";
import { envStrings, filterEnvRecord, filterEnvStrings, formatEnvFile, mergeBundleEnv } from "./env.js";
import { type FileOp, type FileOpResult, type FileUser, removeEmptyDir, runFileOps } from "@jobrt/host-services";
import type { CachedImage } from "@jobrt/images";
import {
  IMAGE_OPTION,
  checkImageVolumes,
  fitImageToStep,
  imageArgs,
  imageHasMountPoint,
  imageOption,
  releaseImageOfStep,
  setupImage,
  validateImage,
} from "./image/request.js";
import { bundleFindings, imageFindings, toolFinding, unnamedFinding } from "./check.js";
import { defaultRuncTool, ociTools } from "./tools.js";
import { type CutShortTask, cutShortCgroups } from "./leftovers.js";
import { type MissingCommand, lookupInConfig, missingStatus } from "./missingcommand.js";
import { GUARD_PROGRAM } from "./missingguard.js";
import { refuseBytesNotUtf8 } from "./notutf8.js";
import { type PatternValues, PatternValueError, expandPattern } from "./pattern.js";
import { CONTAINER_ID_OPTION, requestedContainerId, stepContainerId } from "./containername.js";
import { procStat } from "@jobrt/host-services";
import { runScript } from "./shell.js";
import { spoolMountProblem } from "./spoolmount.js";
import { isStepDirOf, makeStepDir } from "./stepdir.js";
import { trustedCrashState } from "./crashstate.js";
import { type OciStepState, type StepState, confFromJson, confToJson } from "./ocistepstate.js";
import { markName } from "@jobrt/images";
import { teardown } from "./teardown.js";
import { WATCHDOG_NAME, WATCHDOG_PID_FILE, type WatchdogSpec } from "./watchdog.js";

/** Time-outs of the control commands, in ms. Every runtime command is bounded. */
export const COMMAND_TIMEOUTS = { create: 60_000, start: 30_000, query: 10_000, kill: 10_000, delete: 30_000 } as const;
export type CommandTimeouts = { -readonly [K in keyof typeof COMMAND_TIMEOUTS]: number };

/** The environment variable (in jobrt's own environment) that overrides some of the time-outs. */
export const TIMEOUTS_VARIABLE = "JOBRT_OCI_TIMEOUTS";

/**
 * COMMAND_TIMEOUTS with the overrides of $JOBRT_OCI_TIMEOUTS (`create=S,start=S,query=S,kill=S,delete=S`,
 * seconds, any subset), for a site whose runtime is slower than runc, or a test that must see a
 * time-out fire within seconds. A bad value is an error naming the variable and the rule.
 */
export function commandTimeouts(text: string | undefined = process.env[TIMEOUTS_VARIABLE]): CommandTimeouts {
  const t: CommandTimeouts = { ...COMMAND_TIMEOUTS };
  if (text === undefined || text.trim() === "") return t;
  for (const item of text.split(",")) {
    const m = /^\s*([a-z]+)\s*=\s*([0-9]+(?:\.[0-9]+)?)\s*$/.exec(item);
    const key = m?.[1] as keyof CommandTimeouts | undefined;
    const seconds = Number(m?.[2]);
    if (!m || key === undefined || !(key in t) || !(seconds > 0) || seconds > 86_400) {
      throw jobrtError(
        "ERR_CONF",
        {
          where: `$${TIMEOUTS_VARIABLE}`,
          problem: `${JSON.stringify(item.trim())} is not KEY=SECONDS with KEY one of ${Object.keys(t).join(", ")} and 0 < SECONDS <= 86400`,
        },
        { details: { variable: TIMEOUTS_VARIABLE } },
      );
    }
    t[key] = Math.round(seconds * 1000);
  }
  return t;
}

interface TaskState {
  task: TaskRecord;
  taskDir: string;
  /** Pattern values used for this task's commands (pid filled in when known). */
  values: PatternValues;
  runtimeEnv: Record<string, string>;
  /** Set by teardown: the container's cgroup dirs that could not be removed (one line). */
  cgroupsLeft?: string;
}

/** The step state setup returns, as JSON (the host journals it). */
function stateToJson(st: StepState): OciStepState {
  const { conf, request: _request, identity: _identity, ...rest } = st;
  return { ...rest, conf: confToJson(conf) };
}

/** A hook's working state: the journaled step state, with the request and identity from the record. */
function stateFromJson(json: OciStepState | undefined, step: StepRecord): StepState | undefined {
  if (!json || !step.container) return undefined;
  const identity = identityFor(step);
  return { ...json, conf: confFromJson(json.conf), request: step.container, ...(identity ? { identity } : {}) };
}

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

function requestError(message: string, key?: string): JobrtError {
  return jobrtError(
    "ERR_CONTAINER_REQUEST",
    { problem: message },
    { details: { runtime: "runtime/oci", ...(key ? { key } : {}) } },
  );
}

/** Checks the job's container options against what this runtime can do. */
export function checkRequest(c: ContainerRequest, conf: OciConf | undefined): Mount[] {
  const image = imageOption(c);
  if (image !== undefined && c.value !== undefined)
    throw requestError("give either --container BUNDLE or --container-image REF, not both", "--container-image");
  if (image === undefined && (c.value === undefined || c.value === "")) {
    throw requestError(
      "--container-* options need --container BUNDLE (an OCI bundle directory) or --container-image REF",
      "--container",
    );
  }
  if (image !== undefined && conf?.ignoreFileConfigJson)
    throw requestError(
      `--container-image needs config.json, but ${conf.file} sets IgnoreFileConfigJson=true`,
      "--container-image",
    );
  requestedContainerId(c);
  // --container-module, --container-entrypoint and other --container-opt keys: the host refuses them (meta.accepts).
  for (const e of c.env) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*=/.test(e))
      throw requestError(`--container-env ${JSON.stringify(e)}: expected NAME=VALUE`, "--container-env");
  }
  const needsConfig = c.volumes.length > 0 || c.workdir !== undefined || c.clearEnv;
  if (needsConfig && conf?.ignoreFileConfigJson) {
    throw requestError(
      `--container-volume, --container-workdir and --container-clearenv need config.json, but ${conf.file} sets IgnoreFileConfigJson=true`,
    );
  }
  // Devices live in config.json: without it they would silently not be there.
  if (c.deviceEdits && conf?.ignoreFileConfigJson) {
    throw requestError(
      `--container-device ${c.deviceEdits.devices[0]} needs config.json, but ${conf.file} sets IgnoreFileConfigJson=true`,
      "--container-device",
    );
  }
  if (c.workdir !== undefined && !isAbsolute(c.workdir))
    throw requestError(
      `--container-workdir ${JSON.stringify(c.workdir)}: must be an absolute path`,
      "--container-workdir",
    );
  return c.volumes.map(parseVolume);
}

/** oci.conf, or the embedded runc default when there is none (fails when runc is missing too). */
export function resolveConf(node: NodeConf, step: StepRecord): OciConf {
  const conf = loadOciConf(node.confDir);
  if (conf) {
    for (const w of conf.warnings) node.log("warn", w);
    return conf;
  }
  const runc = findProgram("runc", step.env.PATH) ?? findProgram("runc", process.env.PATH);
  if (!runc) {
    throw jobrtError(
      "ERR_CONTAINER_NOT_CONFIGURED",
      {
        problem: `--container needs a container runtime: there is no ${join(node.confDir, "oci.conf")} and runc is not on PATH; install runc (apt-get install runc) or write an oci.conf (see docs/runtime-oci.md)`,
      },
      { details: { runtime: "runtime/oci", file: join(node.confDir, "oci.conf") } },
    );
  }
  const rootless = step.uid !== 0;
  if (rootless && !userNamespacesAvailable()) {
    throw jobrtError(
      "ERR_CONTAINER_NOT_CONFIGURED",
      {
        problem: `--container as uid ${step.uid} needs rootless runc, and this machine has unprivileged user namespaces disabled; enable them (sysctl kernel.unprivileged_userns_clone=1) or write an oci.conf (see docs/runtime-oci.md)`,
      },
      { details: { runtime: "runtime/oci" } },
    );
  }
  node.log(
    "verbose",
    `runtime oci: no ${join(node.confDir, "oci.conf")}, using the embedded ${rootless ? "rootless " : ""}runc configuration (${runc})`,
  );
  return embeddedDefaultConf(runc, rootless);
}

function identityFor(step: StepRecord): FileUser | undefined {
  const root = (process.getuid?.() ?? -1) === 0;
  return root && (step.uid !== 0 || step.gid !== 0) ? { uid: step.uid, gid: step.gid } : undefined;
}

/** One file operation; a failure to take the user's ids is a failed result too. */
function fsOne(op: FileOp, as: FileUser | undefined): FileOpResult {
  try {
    return runFileOps([op], as)[0] as FileOpResult;
  } catch (error) {
    return { ok: false, error: messageOf(error) };
  }
}

/** Expands a path key (no shell quoting); an unknown value is a configuration error. */
function expandPath(conf: OciConf, key: string, pattern: string, values: PatternValues): string {
  try {
    return expandPattern(pattern, values, { shell: false });
  } catch (error) {
    throw jobrtError(
      "ERR_CONF",
      { where: `${conf.file}: ${key}`, problem: messageOf(error) },
      { details: { file: conf.file, key } },
    );
  }
}

function expandCommand(st: StepState, key: keyof OciConf["commands"], values: PatternValues): string {
  const pattern = st.conf.commands[key] as string;
  try {
    return expandPattern(pattern, values, { shell: true });
  } catch (error) {
    if (error instanceof PatternValueError) {
      throw jobrtError(
        "ERR_CONF",
        { where: `${st.conf.file}: ${key}`, problem: `${error.message}, so the command is not run` },
        { details: { file: st.conf.file, key } },
      );
    }
    throw error;
  }
}

async function setup({ node, step, client }: SetupContext): Promise<OciStepState | undefined> {
  const c = step.container;
  if (!c) return undefined;
  let st: StepState;
  let image: CachedImage | undefined;
  try {
    checkRequest(c, undefined);
    const conf = resolveConf(node, step);
    const mounts = checkRequest(c, conf);
    const ref = imageOption(c);
    if (ref !== undefined) image = await setupImage(node, step, ref, client.progress);
    st = await stepState(node, step, conf, mounts, client, image);
    if (image) checkImageVolumes(st.rootfs, st.mounts);
  } catch (error) {
    if (image) await releaseImageOfStep(node, step, image);
    throw error;
  }
  ensureStepDir(st.stepDir, st.identity, step);
  return stateToJson(st);
}

/** What setup works out for a step: bundle, rootfs, spool dir, pattern values. */
async function stepState(
  node: NodeConf,
  step: StepRecord,
  conf: OciConf,
  mounts: Mount[],
  client: ClientInfo | undefined,
  image?: CachedImage,
): Promise<StepState> {
  const c = step.container as ContainerRequest;
  const timeouts = commandTimeouts();
  const identity = identityFor(step);
  // An image step's bundle is its cached image.
  const bundle = image ? image.bundle : c.value !== undefined ? resolve(step.cwd, c.value) : "";
  let bundleConfig: BundleConfig | undefined;
  let rootfs = bundle;
  if (!conf.ignoreFileConfigJson && bundle !== "") {
    const file = join(bundle, "config.json");
    // Read as the job user: a root host must not copy files the user cannot read (runtime-oci.md W8).
    const r = fsOne({ op: "read", path: file }, identity);
    if (!r.ok) {
      const why = r.code === "ENOENT" ? "no such file (is --container an OCI bundle directory?)" : r.error;
      throw jobrtError(
        "ERR_CONTAINER_REQUEST",
        { problem: `cannot read ${file}: ${why}` },
        { details: { runtime: "runtime/oci", file } },
      );
    }
    bundleConfig = parseBundleConfig(r.value as string, file, bundle);
    rootfs = bundleConfig.rootfs;
    if (image) fitImageToStep(node, bundleConfig.config, step.uid);
    if (conf.embedded && step.uid !== 0) {
      const problem = fitRootless(bundleConfig.config, step.uid, step.gid);
      if (problem)
        throw jobrtError(
          "ERR_CONTAINER_REQUEST",
          { problem: `${file}: ${problem}` },
          { details: { runtime: "runtime/oci", file } },
        );
    }
  }
  const { base, stepDir } = stepPlace(node, step, conf, bundle, rootfs);
  return {
    conf,
    request: c,
    bundle,
    rootfs,
    ...(bundleConfig ? { bundleConfig } : {}),
    mounts,
    stepDir,
    ...(identity ? { identity } : {}),
    base,
    ...(image ? { image: withoutMark(image) } : {}),
    verbose: (client?.verbose ?? 0) >= 2,
    timeouts,
    hostCgroups: hostCgroupDirs(),
  };
}

/** A step's pattern values and its spool dir (in ContainerPath, or SpoolDir), as setup works them out. */
function stepPlace(
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

/** Each process names its own in-use mark of an image (markName): the state carries none. */
function withoutMark(image: CachedImage): Omit<CachedImage, "mark"> {
  const { mark: _mark, ...rest } = image;
  return rest;
}

const taskDirOf = (st: StepState, task: TaskRecord) => join(st.stepDir, `task-${task.localId}`);

async function taskInit({ step, task, state }: TaskHookContext<OciStepState>): Promise<void> {
  const st = stateFromJson(state, step);
  if (!st) return;
  const taskDir = taskDirOf(st, task);
  let r: FileOpResult = { ok: false, error: "not tried" };
  // Under srun another task's jobrt may finish and remove the (then empty) step dir between our
  // setup and this point: make it again and retry.
  for (let attempt = 0; attempt < 5; attempt++) {
    if (attempt > 0) ensureStepDir(st.stepDir, st.identity, step);
    r = fsOne({ op: "mkdir", path: taskDir, mode: 0o770 }, st.identity);
    if (r.ok || r.code !== "ENOENT") break;
  }
  if (!r.ok)
    throw jobrtError(
      "ERR_LAUNCH",
      { problem: `cannot create the task spool dir ${taskDir}: ${r.error}` },
      { details: { runtime: "runtime/oci", path: taskDir } },
    );
}

/** Creates the step spool dir (and missing parents) as the host, owned by the job user. */
function ensureStepDir(stepDir: string, identity: FileUser | undefined, step: StepRecord): void {
  try {
    // Concurrent per-task hosts of one step (srun ... jobrt exec) all get here: EEXIST is fine.
    makeStepDir(stepDir, 0o770, identity, [step.uid]);
  } catch (error) {
    throw jobrtError(
      "ERR_LAUNCH",
      { problem: `cannot create the step spool dir ${stepDir}: ${messageOf(error)}` },
      { details: { runtime: "runtime/oci", path: stepDir } },
    );
  }
}

async function run({ node, step, task, state }: TaskHookContext<OciStepState>): Promise<ExecSpec | NotSupported> {
  const st = stateFromJson(state, step);
  if (!st) return NOT_SUPPORTED;
  const taskDir = taskDirOf(st, task);
  const { conf, request } = st;
  refuseBytesNotUtf8(task, !request.clearEnv, request.env);

  // The job env as the container sees it: task env (or nothing with --container-clearenv), the
  // bundle's env on top (Slurm's precedence), --container-env last, then EnvExclude.
  let env = request.clearEnv ? [] : envStrings(task.env);
  if (st.bundleConfig) env = mergeBundleEnv(env, st.bundleConfig.env);
  // The devices' env (CUDA_VISIBLE_DEVICES renumbered) over the host's; --container-env still wins.
  if (request.deviceEdits) env = mergeBundleEnv(env, request.deviceEdits.env);
  if (request.env.length > 0) env = mergeBundleEnv(env, request.env);
  env = filterEnvStrings(env, conf.envExclude);

  const { values, runtimeEnv } = commandContext(st, task, taskDir);
  const ts: TaskState = { task, taskDir, values, runtimeEnv };
  const ops: FileOp[] = [];
  let missing: MissingCommand | undefined;
  if (st.bundleConfig) {
    // One warning per step record: its first task's.
    const destination = spoolMountDestination(node, st, values, task.localId === step.tasks[0]?.localId);
    const config = rewriteConfig(st.bundleConfig.config, {
      terminal: step.pty,
      rootfs: st.rootfs,
      ...(destination !== undefined && spoolMountFits(node, st, destination)
        ? { spoolMount: { source: st.stepDir, destination } }
        : {}),
      extraMounts: st.mounts,
      disableHooks: conf.disableHooks,
      env,
      args: st.image ? imageArgs(st.bundleConfig.config, task.argv) : task.argv,
      ...(request.workdir !== undefined ? { cwd: request.workdir } : {}),
      ...(request.deviceEdits ? { devices: request.deviceEdits } : {}),
    });
    ops.push({
      op: "write",
      dir: ts.taskDir,
      name: "config.json",
      content: `${JSON.stringify(config, null, 2)}\n`,
      mode: 0o600,
    });
    if (conf.mode === "run")
      missing = missingStatus(lookupInConfig(config), String((config.process as { args: unknown[] }).args[0]));
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

  if (conf.mode === "run") {
    let spec: ExecSpec;
    if (conf.runArgv) {
      const argv = conf.runArgv.map((word) => expandPattern(word, values, { shell: false }));
      node.log("debug", `runtime oci: task ${task.localId}: RunTimeRun: ${JSON.stringify(argv)}`);
      spec = { argv, env: runtimeEnv, cwd: step.cwd };
    } else {
      const command = expandCommand(st, "RunTimeRun", values);
      node.log("debug", `runtime oci: task ${task.localId}: RunTimeRun: ${command}`);
      spec = { argv: ["/bin/sh", "-c", runScript(command)], env: runtimeEnv, cwd: step.cwd, shell: true };
    }
    if (!missing) return spec;
    // The runtime will fail to exec it: the guard turns that failure into 127/126 (missingguard.ts).
    node.log(
      "verbose",
      `runtime oci: task ${task.localId}: ${missing.message.replace(/^jobrt-oci: /, "")}: the runtime runs under the missing-command guard`,
    );
    return { ...spec, argv: [process.execPath, GUARD_PROGRAM, taskDir, spec.signals ?? "group", ...spec.argv] };
  }
  if (step.pty) {
    throw requestError(
      `--pty needs run mode: create/start would need a console socket that RunTimeCreate cannot be given; set RunTimeRun in ${conf.file}`,
      "--pty",
    );
  }
  // Check now that every command expands, so a bad pattern fails before anything starts.
  for (const key of ["RunTimeCreate", "RunTimeQuery"] as const) expandCommand(st, key, values);
  return supervisorExec(node, step, st, ts, values, runtimeEnv);
}

/** The create/start task: createstart.pl, which runs its whole lifecycle (createstart.ts). */
function supervisorExec(
  node: NodeConf,
  step: StepRecord,
  st: StepState,
  ts: TaskState,
  values: PatternValues,
  runtimeEnv: Record<string, string>,
): ExecSpec {
  const argv = createStartArgv(
    findProgram("perl", runtimeEnv.PATH) ?? findProgram("perl", undefined),
    watchdogSpec(st, values, ts.taskDir),
    createStartSpec(node, st, values),
  );
  if (!argv)
    throw jobrtError(
      "ERR_LAUNCH",
      {
        problem: `create/start mode needs perl (Debian's perl-base) on PATH and an architecture whose prctl number jobrt knows (this is ${process.arch}): one of them is missing; set RunTimeRun in ${st.conf.file} for run mode`,
      },
      { details: { runtime: "runtime/oci" } },
    );
  return { argv, env: runtimeEnv, cwd: step.cwd };
}

/**
 * The commands createstart.pl runs besides the watchdog's, `%p` left as a placeholder it fills
 * in; one that cannot be expanded is not run (Start: the task fails saying why).
 */
function createStartSpec(node: NodeConf, st: StepState, values: PatternValues): CreateStartSpec {
  const expand = (key: "RunTimeStart" | "RunTimeQuery" | "RunTimeKill" | "RunTimeDelete") => {
    try {
      return {
        command: expandPattern(st.conf.commands[key] as string, values, {
          shell: true,
          pidPlaceholder: PID_PLACEHOLDER,
        }),
      };
    } catch (error) {
      return { command: "", problem: (error as Error).message };
    }
  };
  const start = expand("RunTimeStart");
  return {
    start: start.command,
    startProblem: start.problem ?? "",
    query: expand("RunTimeQuery").command,
    kill: expand("RunTimeKill").command,
    delete: expand("RunTimeDelete").command,
    timeouts: { ...st.timeouts },
    graceMs: Math.min(Math.max(node.killWait * 500, 500), 10_000),
    verbose: st.verbose,
  };
}

/** The create/start watchdog's commands: Kill and Delete only if they expand without `%p`. */
function watchdogSpec(st: StepState, values: PatternValues, taskDir: string): WatchdogSpec {
  const orEmpty = (key: "RunTimeKill" | "RunTimeDelete") => {
    try {
      return expandCommand(st, key, values);
    } catch {
      return "";
    }
  };
  const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));
  return {
    taskDir,
    create: expandCommand(st, "RunTimeCreate", values),
    kill: orEmpty("RunTimeKill"),
    delete: orEmpty("RunTimeDelete"),
    killSeconds: seconds(st.timeouts.kill),
    deleteSeconds: seconds(st.timeouts.delete),
  };
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

/**
 * The container pid a create/start task's supervisor recorded in its task dir (read as the job
 * user, like every other file there). A supervisor that was killed leaves its watchdog finishing an in-flight create and deleting the
 * container: that is waited for first, since a query before it is done would find no container
 * yet and leak it.
 */
async function createStartNotes(st: StepState, ts: TaskState): Promise<{ pid?: number; watchdog: boolean }> {
  const [r, w] = fsOps(
    [
      { op: "read", path: join(ts.taskDir, "container.pid") },
      { op: "read", path: join(ts.taskDir, WATCHDOG_PID_FILE) },
    ],
    st.identity,
    () => {},
  );
  const number = (x: FileOpResult | undefined) => {
    const n = x?.ok ? Number(String(x.value).trim()) : Number.NaN;
    return Number.isInteger(n) && n > 0 ? n : undefined;
  };
  const watchdog = number(w);
  if (watchdog !== undefined)
    await waitForWatchdog(watchdog, st.timeouts.create + st.timeouts.kill + st.timeouts.delete);
  const pid = number(r);
  return { ...(pid !== undefined ? { pid } : {}), watchdog: watchdog !== undefined };
}

/** Waits (bounded) until `pid` is no longer a running create/start watchdog. */
async function waitForWatchdog(pid: number, boundMs: number): Promise<void> {
  const running = () => {
    const s = procStat(pid);
    if (!s || s.state === "Z" || s.state === "X") return false;
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(WATCHDOG_NAME);
    } catch {
      return false;
    }
  };
  const end = Date.now() + boundMs;
  for (let delay = 2; running() && Date.now() < end; delay = Math.min(delay * 2, 50))
    await new Promise((r) => setTimeout(r, delay));
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

/** Is `pid` still the host's own, running child (so it cannot be a recycled pid)? */
function ownChildRunning(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  const s = procStat(pid);
  return s !== undefined && s.state !== "Z" && s.state !== "X" && s.ppid === process.pid;
}

type TeardownResult = Awaited<ReturnType<typeof teardown>>;

/** SIGKILL to a task's process, with the job user's rights. */
async function forceKillTask(st: StepState, pid: number): Promise<void> {
  // A task process leads its own process group (the host starts it so): kill all of it, so
  // a runtime that the RunTimeRun shell started as its child goes too.
  const target = procStat(pid)?.pgrp === pid ? -pid : pid;
  if (st.identity) {
    await runShellCommand(`kill -s KILL -- ${target}`, {
      key: "SIGKILL",
      env: { PATH: "/usr/bin:/bin" },
      cwd: "/",
      timeoutMs: 5000,
      stdio: "capture",
      ...st.identity,
    }).catch(() => undefined);
    return;
  }
  try {
    process.kill(target, "SIGKILL");
  } catch {
    // already gone
  }
}

async function teardownTask(
  node: NodeConf,
  step: StepRecord,
  st: StepState,
  ts: TaskState,
  afterCrash: boolean,
): Promise<TeardownResult> {
  const { values, runtimeEnv: env } = ts;
  // A task the host never started has no container; after a crash nothing is known, so ask.
  if (!afterCrash && ts.task.pid === undefined) return "gone";
  // The embedded default's `runc run` removes its container when it exits by itself: an exit it
  // reported (not a signal, not runc's own 125+ failure range) leaves nothing to query or delete.
  // This spares one runc process per task at cleanup; site oci.conf commands are always queried.
  const exit = ts.task.exit;
  if (
    st.conf.embedded &&
    st.conf.mode === "run" &&
    exit &&
    exit.signal === null &&
    exit.code !== null &&
    exit.code < 125
  )
    return "gone";
  const cwd = existsSync(step.cwd) ? step.cwd : "/";
  // create/start: the supervisor recorded the container's pid in the (user-owned) task dir.
  let recorded: number | undefined;
  let createInFlight = false;
  if (st.conf.mode === "create-start") {
    const notes = await createStartNotes(st, ts);
    recorded = notes.pid;
    createInFlight = notes.watchdog && notes.pid === undefined;
  }
  const pidNow = (): number | undefined => {
    if (st.conf.mode === "run") return ownChildRunning(ts.task.pid) ? ts.task.pid : undefined;
    const s = recorded !== undefined ? procStat(recorded) : undefined;
    return s && s.state !== "Z" ? recorded : undefined;
  };
  const log = (level: "verbose" | "debug" | "warn", m: string) =>
    node.log(level, `runtime oci: task ${ts.task.localId}: ${m}`);
  // A task process that died of SIGKILL was killed by the host after its KillWait (or by a second
  // signal): that grace has been spent, so the container gets no second one. Otherwise a stop
  // would take KillWait twice (the host's wait, then this one).
  const graceSpent = ts.task.exit?.signal === "SIGKILL";
  const runKey = async (key: "RunTimeQuery" | "RunTimeKill" | "RunTimeDelete"): Promise<CommandResult | undefined> => {
    const pattern = st.conf.commands[key];
    if (pattern === undefined) return undefined;
    const pid = pidNow();
    let command: string;
    try {
      command = expandPattern(pattern, { ...values, ...(pid !== undefined ? { pid } : {}) }, { shell: true });
    } catch (error) {
      if (error instanceof PatternValueError) {
        log("debug", `${key} not run: ${error.message}`);
        return undefined;
      }
      throw error;
    }
    log("debug", `${key}: ${command}`);
    const timeoutMs =
      key === "RunTimeDelete" ? st.timeouts.delete : key === "RunTimeKill" ? st.timeouts.kill : st.timeouts.query;
    const r = await runShellCommand(command, { key, env, cwd, timeoutMs, stdio: "capture", ...(st.identity ?? {}) });
    if (r.code !== 0) log("debug", `${key} exited with ${r.code ?? r.signal}: ${r.stderr.trim()}`);
    return r;
  };
  const result = await teardown({
    hasQuery: st.conf.commands.RunTimeQuery !== undefined,
    graceMs: graceSpent ? 0 : Math.min(Math.max(node.killWait * 1000, 500), 10_000),
    alive: () => pidNow() !== undefined,
    ...(pidNow() !== undefined ? { pid: pidNow() as number } : {}),
    run: runKey,
    forceKill: (pid) => forceKillTask(st, pid),
    log,
  });
  if (result === "gone") await sweepCutShort(st, ts, { createInFlight, afterCrash, runKey, log });
  log("debug", `teardown: ${result}`);
  return result;
}

/**
 * After a teardown that found no container: a create cut short by a kill leaves runtime state and
 * cgroup dirs that no query shows; they are deleted and removed here (docs/runtime-oci.md, "A
 * create cut short").
 */
async function sweepCutShort(
  st: StepState,
  ts: TaskState,
  o: {
    createInFlight: boolean;
    afterCrash: boolean;
    runKey: (key: "RunTimeDelete") => Promise<unknown>;
    log: CutShortTask["log"];
  },
): Promise<void> {
  const { createInFlight, afterCrash, runKey, log } = o;
  if (createInFlight) {
    // The supervisor and its watchdog died while RunTimeCreate ran (e.g. gc killed the step's
    // cgroup): a create cut short leaves runtime state without a container to query (runc: its
    // state dir). Delete it anyway; the cgroup dirs it made are not in that state: removed here.
    log("verbose", "RunTimeCreate was cut short: running RunTimeDelete anyway");
    await runKey("RunTimeDelete").catch(() => undefined);
    ts.cgroupsLeft = await cutShortCgroups(cutShortTask(st, ts, "RunTimeCreate", afterCrash, log));
  } else if (st.conf.mode === "run" && (afterCrash || ts.task.exit?.signal)) {
    // A killed `runc run` may have been half-way through its create just the same, and only the
    // cgroup dirs it left show it: RunTimeDelete (for its state dir) runs when there are some.
    const whenFound = () => runKey("RunTimeDelete").catch(() => undefined);
    ts.cgroupsLeft = await cutShortCgroups({ ...cutShortTask(st, ts, "RunTimeRun", afterCrash, log), whenFound });
  }
}

/** What leftovers.ts needs to find and remove the cgroup dirs of a task's container. */
function cutShortTask(
  st: StepState,
  ts: TaskState,
  key: "RunTimeCreate" | "RunTimeRun",
  afterCrash: boolean,
  log: CutShortTask["log"],
): CutShortTask {
  const { RunTimeQuery, RunTimeDelete } = st.conf.commands;
  return {
    key,
    patterns: [st.conf.commands[key], RunTimeQuery, RunTimeDelete],
    values: ts.values,
    cgroupsPath: st.conf.ignoreFileConfigJson
      ? undefined
      : (st.bundleConfig?.config.linux as { cgroupsPath?: unknown } | undefined)?.cgroupsPath,
    hostCgroups: st.hostCgroups,
    uid: st.identity?.uid ?? process.getuid?.() ?? 0,
    identity: st.identity,
    afterCrash,
    log,
  };
}

function existsNoFollow(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/** A task's pattern values and the environment its runtime commands get (run and cleanup alike). */
function commandContext(
  st: StepState,
  task: TaskRecord,
  taskDir: string,
): { values: PatternValues; runtimeEnv: Record<string, string> } {
  const values: PatternValues = { ...st.base, taskId: task.localId, envFile: join(taskDir, "environment") };
  if (st.conf.ignoreFileConfigJson) {
    values.bundle = st.bundle;
    values.argv = task.argv;
  } else {
    values.bundle = taskDir;
    values.argv = [];
  }
  return { values, runtimeEnv: filterEnvRecord(task.env, st.conf.runTimeEnvExclude) };
}

/**
 * The tasks of this record that may have a container: those whose task dir exists (a task dir is
 * made before its container, so a task without one never had a container).
 */
function tasksToTearDown(st: StepState, step: StepRecord, afterCrash: boolean): TaskState[] {
  const out: TaskState[] = [];
  for (const task of step.tasks) {
    const taskDir = taskDirOf(st, task);
    if (!existsNoFollow(taskDir)) continue;
    const { values, runtimeEnv } = commandContext(st, task, taskDir);
    // After a crash the journaled task's pid is not this host's child.
    out.push({ task: afterCrash ? { ...task, pid: undefined } : task, taskDir, values, runtimeEnv } as TaskState);
  }
  return out;
}

async function cleanup(ctx: CleanupContext<OciStepState>): Promise<void> {
  const left: TaskState[] = [];
  await cleanupStep(ctx, left);
  // Not a warning: gc must report the step as not cleaned up, and keep it for another try.
  const kept = (ts: TaskState) => (ctx.afterCrash ? ` (kept ${ts.taskDir})` : "");
  if (left.length > 0)
    throw new Error(left.map((ts) => `task ${ts.task.localId}: ${ts.cgroupsLeft}${kept(ts)}`).join("; "));
}

/** Cleanup proper; the tasks whose container's cgroup dirs could not be removed go into `left`. */
async function cleanupStep(
  { node, step, state, afterCrash }: CleanupContext<OciStepState>,
  left: TaskState[],
): Promise<void> {
  const warn = (m: string) => node.log("warn", `runtime oci: ${m}`);
  let st: StepState | undefined;
  try {
    st = cleanupState(node, step, state, afterCrash);
  } catch (error) {
    // The host's own configuration unreadable now: gc keeps the step for another try.
    if (afterCrash && isJobrtError(error)) throw error;
    warn(`cleanup: ${messageOf(error)}`);
    return;
  }
  if (!st) {
    // No state: setup failed before it made anything (its error is the one the user needs), or
    // never ran.
    node.log("debug", "runtime oci: cleanup: no step state from setup; nothing to do");
    return;
  }
  try {
    const tasks = tasksToTearDown(st, step, afterCrash);
    const results = await Promise.all(
      tasks.map((ts) =>
        teardownTask(node, step, st, ts, afterCrash).catch((error): TeardownResult => {
          warn(`task ${ts.task.localId}: teardown failed: ${messageOf(error)}`);
          return "left";
        }),
      ),
    );
    left.push(...tasks.filter((ts) => ts.cgroupsLeft !== undefined));
    if (st.conf.disableCleanup) return;
    // A task whose container could not be deleted keeps its dir (its config.json, and the step
    // dir with the runtime's state), so nothing that may still run loses its files.
    // So does, in gc, a task whose container's cgroup dirs still hold processes: the next gc
    // tries again with it (after a run, nothing would come back for it).
    const done = tasks.filter((ts, i) => results[i] !== "left" && !(afterCrash && ts.cgroupsLeft !== undefined));
    for (const [i, ts] of tasks.entries())
      if (results[i] === "left") warn(`task ${ts.task.localId}: container may still exist; keeping ${ts.taskDir}`);
    report(
      fsOps(
        done.map((ts) => ({ op: "remove", path: ts.taskDir })),
        st.identity,
        warn,
      ),
      warn,
    );
    // Under srun every task has its own jobrt: the step dir is shared. Once no task dir is left
    // (no task of this step is between taskInit and cleanup on this node), whatever the runtime
    // or a wrapper left in %m goes too (runtime-oci.md W14), then the dir itself.
    let names: string[];
    try {
      names = readdirSync(st.stepDir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") warn(`cannot list ${st.stepDir}: ${messageOf(error)}`);
      return;
    }
    if (names.some((n) => n.startsWith("task-"))) {
      node.log("debug", `runtime oci: ${st.stepDir} still holds other tasks' dirs; left for them`);
      return;
    }
    report(
      fsOps(
        names.map((n) => ({ op: "remove", path: join(st.stepDir, n) })),
        st.identity,
        warn,
      ),
      warn,
    );
    if (st.identity && !isStepDirOf(st.stepDir, st.identity)) {
      warn(`not removing ${st.stepDir}: it is not a directory of uid ${st.identity.uid}, as setup made it`);
      return;
    }
    try {
      if (!removeEmptyDir(st.stepDir)) node.log("debug", `runtime oci: ${st.stepDir} is in use again; left`);
    } catch (error) {
      warn(`cannot remove ${st.stepDir}: ${messageOf(error)}`);
    }
  } catch (error) {
    warn(`cleanup: ${messageOf(error)}`);
  } finally {
    // This process's own in-use mark; after a crash the dead host's mark is stale already, but
    // the step's pin dir still goes.
    const image = st.image && !afterCrash ? { ...st.image, mark: markName(step.jobId, step.stepId) } : undefined;
    if (st.image || st.request.options[IMAGE_OPTION]) await releaseImageOfStep(node, step, image);
  }
}

/** Cleanup's state: after a crash, only what trustedCrashState keeps of the journaled one. */
function cleanupState(
  node: NodeConf,
  step: StepRecord,
  state: OciStepState | undefined,
  afterCrash: boolean,
): StepState | undefined {
  if (!afterCrash) return stateFromJson(state, step);
  return trustedCrashState(state, step, {
    // The record's PATH is the user's: the embedded default's runc is looked for on the host's.
    conf: () => resolveConf(node, { ...step, env: {} }),
    timeouts: () => commandTimeouts(),
    identity: identityFor(step),
    nodeName: node.nodeName,
    place: (conf, bundle, rootfs) => stepPlace(node, step, conf, bundle, rootfs),
    journaled: () => stateFromJson(state, step),
  });
}

function fsOps(ops: FileOp[], as: FileUser | undefined, warn: (m: string) => void): FileOpResult[] {
  if (ops.length === 0) return [];
  try {
    return runFileOps(ops, as);
  } catch (error) {
    warn(`cannot remove files: ${messageOf(error)}`);
    return [];
  }
}

function report(results: FileOpResult[], warn: (m: string) => void): void {
  for (const r of results) {
    if (r.ok && Array.isArray(r.value) && r.value.length > 0) warn(`left behind: ${r.value.join("; ")}`);
    else if (!r.ok) warn(r.error);
  }
}

/** The programs oci.conf's RunTime* commands run (runc, when there is no oci.conf), as the host finds them. */
async function tools({ node }: ToolsContext): Promise<RuntimeTool[]> {
  const conf = loadOciConf(node.confDir);
  if (!conf) return [await defaultRuncTool([process.env.PATH])];
  return (await ociTools(conf, [process.env.PATH])).tools;
}

/** What this node can see of a request: the tools its commands run, the bundle or the image. */
async function check({ node, step }: CheckContext): Promise<CheckFinding[]> {
  const c = step.container;
  if (!c) return [];
  let conf: OciConf;
  try {
    conf = resolveConf(node, step);
  } catch (error) {
    return [{ subject: "oci.conf", status: "failed", detail: messageOf(error) }];
  }
  // The step's PATH first, as resolveConf looks for the embedded default's runc.
  const found = await ociTools(conf, [step.env.PATH, process.env.PATH]);
  const findings = [...found.tools.map(toolFinding), ...found.unnamed.map(unnamedFinding)];
  const ref = imageOption(c);
  if (ref !== undefined) findings.push(...(await imageFindings(node, step, ref)));
  else {
    // The embedded default runs rootless runc for a job user: setup fits config.json to it (fitRootless).
    const rootless = conf.embedded && step.uid !== 0 ? { uid: step.uid, gid: step.gid } : undefined;
    findings.push(...(await bundleFindings(resolve(step.cwd, c.value ?? ""), conf, identityFor(step), rootless)));
  }
  return findings;
}

async function validate({ node, step }: ValidateContext): Promise<void> {
  const c = step.container;
  if (!c) return;
  checkRequest(c, undefined);
  checkRequest(c, resolveConf(node, step));
  const ref = imageOption(c);
  if (ref !== undefined) await validateImage(node, step, ref);
}

/** The OCI runtime plugin (Slurm's runtime/oci, oci.conf-compatible). */
export const ociPlugin = definePlugin<OciStepState>(
  {
    name: "oci",
    type: "runtime/oci",
    version: packageVersion(import.meta.url),
    capabilities: ["container", "oci.conf", "run", "create-start"],
    accepts: [
      "value",
      "volumes",
      "env",
      "workdir",
      "clearEnv",
      "devices",
      `options.${IMAGE_OPTION}`,
      `options.${CONTAINER_ID_OPTION}`,
    ],
  },
  {
    setup,
    taskInit,
    run,
    cleanup,
    // An image step's bundle is a cache dir: its digest says what ran.
    describe: ({ state }) => (state?.image ? { digest: state.image.digest } : state ? { bundle: state.bundle } : {}),
    validate,
    tools,
    check,
  },
);
