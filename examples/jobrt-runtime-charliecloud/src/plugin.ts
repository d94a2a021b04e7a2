import { chownSync, mkdirSync, readdirSync, rmSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  type ExecSpec,
  JobrtError,
  type NodeConf,
  type RuntimePlugin,
  type StepRecord,
  type TaskRecord,
  definePlugin,
  messageOf,
  packageVersion,
  jobrtError,
} from "@jobrt/core";
import { findChRun } from "./chrun.js";
import { addDeviceEdits } from "./devices.js";
import { loadConf } from "./conf.js";
import { formatEnvFile } from "./envfile.js";
import { commandCheck } from "./commandcheck.js";
import { type ChRunRequest, imageReference, parseRequest } from "./request.js";
import { type StepImage, acquireStepImage, releaseStepImage } from "@jobrt/images";

interface StepState {
  request: ChRunRequest;
  chRun: string;
  /** Per-step spool dir, when tasks need env files. */
  dir?: string;
  /** The host image service's image for `--container-image`, given back at cleanup. */
  image?: StepImage;
}

const TYPE = "runtime/charliecloud";
const WHO = "runtime charliecloud";
const SPOOL_SUBDIR = "charliecloud";

function stepDir(node: NodeConf, step: StepRecord): string {
  return join(node.spoolDir, SPOOL_SUBDIR, `job${step.jobId}.${step.stepId}`);
}

function taskEnvPath(dir: string, task: TaskRecord): string {
  return join(dir, `task${task.globalId}.env`);
}

/** Env files are needed when the container must not inherit the host env, or gets --container-env. */
function needsTaskFile(request: ChRunRequest): boolean {
  return request.clearEnv || request.env.length > 0;
}

/** The task's files must be readable by the job user, who runs ch-run once the host drops root. */
function giveToUser(node: NodeConf, step: StepRecord, path: string): void {
  if (node.hostUid === 0 && (step.uid !== 0 || step.gid !== 0)) chownSync(path, step.uid, step.gid);
}

function spoolError(what: string, path: string, error: unknown): JobrtError {
  return jobrtError(
    "ERR_LAUNCH",
    { problem: `charliecloud: cannot ${what} ${path}: ${messageOf(error)} (check SpoolDir in jobrt.conf)` },
    {
      cause: error,
      details: { runtime: TYPE, path },
    },
  );
}

function ensureDir(node: NodeConf, step: StepRecord): string {
  const dir = stepDir(node, step);
  try {
    mkdirSync(join(node.spoolDir, SPOOL_SUBDIR), { recursive: true, mode: 0o755 });
    // recursive: another record of this step (srun starts one jobrt per task) may have made it.
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    giveToUser(node, step, dir);
  } catch (error) {
    throw spoolError("create", dir, error);
  }
  return dir;
}

/** The environment ch-run itself starts with; the container inherits it unless clearEnv. */
function chRunEnv(step: StepRecord, task: TaskRecord, request: ChRunRequest): Record<string, string> {
  // ch-run refuses to start without $USER.
  const user = task.env.USER ?? step.user;
  if (!request.clearEnv) return { ...task.env, USER: user };
  return { PATH: task.env.PATH ?? "/usr/local/bin:/usr/bin:/bin", USER: user, HOME: task.env.HOME ?? step.home };
}

function chRunArgv(state: StepState, task: TaskRecord, envFile: string | undefined): string[] {
  const r = state.request;
  const argv = [state.chRun];
  if (r.privateTmp) argv.push("--private-tmp");
  if (r.home) argv.push("--home");
  for (const b of r.binds) argv.push(`--bind=${b.source}:${b.target}`);
  if (r.workdir !== undefined) argv.push(`--cd=${r.workdir}`);
  argv.push("--env-no-expand");
  if (r.clearEnv) argv.push("--unset-env=*");
  if (r.envFile !== undefined) argv.push(`--set-env=${r.envFile}`);
  if (envFile !== undefined) argv.push(`--set-env=${envFile}`);
  argv.push(r.image, "--", ...task.argv);
  return argv;
}

/** Setup's step state from the request and, for `--container-image`, the image's directory. */
function stepState(
  node: NodeConf,
  step: StepRecord,
  conf: ReturnType<typeof loadConf>,
  image: StepImage | undefined,
): StepState {
  const request = parseRequest(step, conf, image?.rootfs);
  const skipped = addDeviceEdits(request, step.container?.deviceEdits);
  if (skipped.length > 0)
    node.log(
      "info",
      `charliecloud: job ${step.jobId}.${step.stepId}: CDI edits ch-run cannot apply: ${skipped.join("; ")} (docs/devices.md)`,
    );
  const chRun = findChRun(conf.chRun);
  const state: StepState = { request, chRun, ...(image ? { image } : {}) };
  if (needsTaskFile(request)) state.dir = ensureDir(node, step);
  node.log("verbose", `charliecloud: job ${step.jobId}.${step.stepId} image ${request.image} with ${chRun}`);
  return state;
}

/** Setup's step state: the host journals it and hands it to every later hook of the step. */
const plugin: RuntimePlugin<StepState> = definePlugin<StepState>(
  {
    name: "charliecloud",
    type: TYPE,
    version: packageVersion(import.meta.url),
    capabilities: ["container", "unprivileged"],
    accepts: [
      "value",
      "volumes",
      "env",
      "workdir",
      "clearEnv",
      "devices",
      "options.env-file",
      "options.private-tmp",
      "options.home",
      "options.image",
    ],
  },
  {
    validate({ node, step }) {
      // An image is only a directory once setup acquired it; its reference is checked there.
      if (imageReference(step) !== undefined) return;
      addDeviceEdits(parseRequest(step, loadConf(node.confDir)), step.container?.deviceEdits);
    },

    async setup({ node, step, client }) {
      const conf = loadConf(node.confDir);
      const ref = imageReference(step);
      const image = ref === undefined ? undefined : await acquireStepImage(node, step, ref, WHO, client.progress);
      try {
        return stepState(node, step, conf, image);
      } catch (error) {
        if (image) await releaseStepImage(node, step, image, WHO);
        throw error;
      }
    },

    taskInit({ node, step, task, state }) {
      if (!state)
        throw jobrtError(
          "ERR_RUNTIME_CONTRACT",
          { problem: "charliecloud: taskInit called before setup" },
          { details: { runtime: TYPE, hook: "taskInit" } },
        );
      if (!state.dir) return;
      const r = state.request;
      // With clearEnv the container gets only the task's SLURM_* variables plus --container-env.
      const vars: [string, string][] = r.clearEnv
        ? Object.entries(task.env).filter(([k]) => k.startsWith("SLURM"))
        : [];
      vars.push(...r.env);
      const file = taskEnvPath(state.dir, task);
      try {
        // Re-create the dir: a sibling record's cleanup may have removed it while it was empty.
        ensureDir(node, step);
        writeFileSync(file, formatEnvFile(vars), { mode: 0o600 });
        giveToUser(node, step, file);
      } catch (error) {
        throw error instanceof JobrtError ? error : spoolError("write", file, error);
      }
    },

    run({ node, step, task, state }): ExecSpec {
      if (!state)
        throw jobrtError(
          "ERR_RUNTIME_CONTRACT",
          { problem: "charliecloud: run called before setup" },
          { details: { runtime: TYPE, hook: "run" } },
        );
      const envFile = state.dir ? taskEnvPath(state.dir, task) : undefined;
      const env = chRunEnv(step, task, state.request);
      const check = commandCheck(state.request, env, task.argv[0] ?? "");
      const spec: ExecSpec = {
        argv: chRunArgv(state, task, envFile),
        env,
        cwd: step.cwd,
        ...(check ? { supervise: { missingCommand: check } } : {}),
      };
      node.log("debug", `charliecloud: task ${task.globalId}: ${JSON.stringify(spec.argv)}`);
      return spec;
    },

    async cleanup({ node, step, state }) {
      if (imageReference(step) !== undefined) await releaseStepImage(node, step, state?.image, WHO);
      // Only this record's task files: other records of the same step (one jobrt per task under
      // srun) may still be running. The dirs go only once empty.
      const dir = stepDir(node, step);
      for (const task of step.tasks) {
        try {
          rmSync(taskEnvPath(dir, task), { force: true });
        } catch (error) {
          node.log("warn", `charliecloud: cannot remove ${taskEnvPath(dir, task)}: ${messageOf(error)}`);
        }
      }
      for (const d of [dir, join(node.spoolDir, SPOOL_SUBDIR)]) {
        try {
          if (readdirSync(d).length > 0) break;
          rmdirSync(d);
        } catch {
          // absent, or a sibling record removed or refilled it meanwhile: leave it
          break;
        }
      }
    },
  },
);

export default plugin;
