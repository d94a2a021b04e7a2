import { join, resolve } from "node:path";
import {
  type ClientInfo,
  type ContainerRequest,
  type NodeConf,
  type SetupContext,
  type StepRecord,
  type TaskHookContext,
  containerImage,
  jobrtError,
  messageOf,
} from "@jobrt/core";
import type { CachedImage } from "@jobrt/images";
import { type BundleConfig, type Mount, fitRootless, parseBundleConfig } from "./bundle.js";
import { hostMpiProblem } from "./hostmpi.js";
import { pmixUserProblem } from "./pmixuser.js";
import { hostCgroupDirs } from "./cgroups.js";
import { commandTimeouts } from "./commandtimeouts.js";
import type { OciConf } from "./conf.js";
import { type FileOpResult, type FileUser, runFileOps, shownText } from "@jobrt/host-services";
import { checkImageVolumes, fitImageToStep, releaseImageOfStep, setupImage } from "./image/request.js";
import { type OciStepState, type StepState, identityFor, stateFromJson, stateToJson } from "./ocistepstate.js";
import { resolveConf } from "./resolveconf.js";
import { makeStepDir } from "./stepdir.js";
import { stepPlace, taskDirOf } from "./stepplace.js";
import { checkRequest } from "./validate.js";

/** The setup hook: checks the request, reads the bundle (or pulls the image) and makes the step spool dir. */
export async function setup({ node, step, client }: SetupContext): Promise<OciStepState | undefined> {
  const c = step.container;
  if (!c) return undefined;
  let st: StepState;
  let image: CachedImage | undefined;
  try {
    checkRequest(c, undefined);
    const conf = resolveConf(node, step);
    const mounts = checkRequest(c, conf);
    const ref = containerImage(c, "runtime/oci");
    if (ref !== undefined) image = await setupImage(node, step, ref, client.progress);
    st = await stepState(node, step, conf, mounts, client, image);
    if (image) checkImageVolumes(st.rootfs, st.mounts);
    checkInjectedMpi(st, ref ?? st.bundle);
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
    const r = runFileOps([{ op: "read", path: file }], identity)[0] as FileOpResult;
    if (!r.ok) {
      const why = r.code === "ENOENT" ? "no such file (is --container an OCI bundle directory?)" : r.error;
      throw jobrtError(
        "ERR_CONTAINER_REQUEST",
        { problem: `cannot read ${shownText(file)}: ${why}` },
        { details: { runtime: "runtime/oci", file } },
      );
    }
    bundleConfig = parseBundleConfig(r.value as string, file, bundle);
    rootfs = bundleConfig.rootfs;
    if (image) await fitImageToStep(node, bundleConfig.config, step.uid);
    if (conf.embedded && step.uid !== 0) {
      const problem = fitRootless(bundleConfig.config, step.uid, step.gid);
      if (problem)
        throw jobrtError(
          "ERR_CONTAINER_REQUEST",
          { problem: `${file}: ${problem}` },
          { details: { runtime: "runtime/oci", file } },
        );
    }
    const pmix = pmixUserProblem(bundleConfig.config, step);
    if (pmix) throw jobrtError("ERR_MPI_WIREUP", { problem: pmix });
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

/** A site's CDI device that binds the host's MPI must meet an MPI the image's programs can use. */
function checkInjectedMpi(st: StepState, image: string): void {
  const problem = hostMpiProblem(st.rootfs, st.bundleConfig?.config, st.request.deviceEdits, st.identity, image);
  if (problem) throw jobrtError("ERR_DEVICE", { problem }, { details: { key: "--container-device" } });
}

/** Each process names its own in-use mark of an image (markName): the state carries none. */
function withoutMark(image: CachedImage): Omit<CachedImage, "mark"> {
  const { mark: _mark, ...rest } = image;
  return rest;
}

/** The taskInit hook: the task's spool dir, before its container exists (see taskDirOf). */
export async function taskInit({ step, task, state }: TaskHookContext<OciStepState>): Promise<void> {
  const st = stateFromJson(state, step);
  if (!st) return;
  const taskDir = taskDirOf(st, task);
  let r: FileOpResult = { ok: false, error: "not tried" };
  // Under srun another task's jobrt may finish and remove the (then empty) step dir between our
  // setup and this point: make it again and retry.
  for (let attempt = 0; attempt < 5; attempt++) {
    if (attempt > 0) ensureStepDir(st.stepDir, st.identity, step);
    r = runFileOps([{ op: "mkdir", path: taskDir, mode: 0o770 }], st.identity)[0] as FileOpResult;
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
