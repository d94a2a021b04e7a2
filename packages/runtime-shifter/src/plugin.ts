import { statSync } from "node:fs";
import { join } from "node:path";
import {
  type JobrtError,
  NOT_SUPPORTED,
  type NodeConf,
  type StepRecord,
  definePlugin,
  jobrtError,
  packageVersion,
} from "@jobrt/core";
import { executableProblem } from "@jobrt/host-services";
import { type ShifterConf, loadShifterConf } from "./conf.js";
import { type PinnedImage, buildExecSpec } from "./exec.js";
import { show } from "./reject.js";
import { type ShifterRequest, validateRequest, wantsContainer } from "./request.js";
import { joinPinDir, leavePinDir, readPin, writePin } from "./pin.js";
import { lookupImage, pullImage } from "./resolve.js";
import { shifterTools, toolFinding } from "./tools.js";
import { type UdiRootConf, loadUdiRootConf } from "./udiroot.js";

interface StepState {
  conf: ShifterConf;
  request: ShifterRequest;
  pinned: PinnedImage;
}

interface Prepared {
  conf: ShifterConf;
  udi: UdiRootConf | undefined;
  request: ShifterRequest;
}

function prepare(node: NodeConf, step: StepRecord): Prepared | undefined {
  const conf = loadShifterConf(node.confDir, node.hostUid);
  const udi = loadUdiRootConf(conf.udiRootConf, conf.udiRootConfExplicit, node.hostUid);
  const request = validateRequest(step, conf, udi);
  return request && { conf, udi, request };
}

/** The shifterimg shifter itself would run: `<udiRootPath>/bin/shifterimg`, unless the site says otherwise. */
export function shifterimgPath(conf: ShifterConf, udi: UdiRootConf | undefined): string {
  if (conf.shifterimgPath) return conf.shifterimgPath;
  return udi?.udiRootPath ? join(udi.udiRootPath, "bin/shifterimg") : "/usr/bin/shifterimg";
}

function imageError(p: Prepared, rule: string): JobrtError {
  return jobrtError(
    "ERR_CONTAINER_IMAGE",
    { problem: `${p.request.imageField} ${show(p.request.image.canonical)}: ${rule}` },
    {
      details: { runtime: "runtime/shifter", key: p.request.imageField },
    },
  );
}

/**
 * Resolves the request to an image id with shifterimg, as the job user (gateway ACLs follow the
 * caller's identity). `pull` only in setup and only when the site allows it; a pull's own exit
 * status means nothing (it exits 0 on FAILURE), so the answer is always a second lookup.
 */
async function pin(
  p: Prepared,
  node: NodeConf,
  step: StepRecord,
  mode: "setup" | "validate",
): Promise<PinnedImage | undefined> {
  const { image } = p.request;
  if (image.type === "id" || image.type === "local")
    return { type: image.type, value: image.tag, request: image.canonical };
  const tool = shifterimgPath(p.conf, p.udi);
  const first = await lookupImage(tool, image, node, step, p.conf);
  if (first.kind === "found") return { type: "id", value: first.id, request: image.canonical };
  if (first.kind === "error") throw imageError(p, `cannot resolve the image: ${first.detail}`);
  const hint = `run "shifterimg pull ${image.canonical}" first (shifterimg lookup found no image you may read)`;
  if (p.conf.pullPolicy !== "if-missing") throw imageError(p, `is not available on this system: ${hint}`);
  if (mode === "validate") {
    node.log(
      "info",
      `shifter: ${image.canonical} is not on the image gateway yet; it will be pulled at launch (PullPolicy=if-missing)`,
    );
    return undefined;
  }
  node.log("info", `shifter: pulling ${image.canonical} (PullPolicy=if-missing)`);
  const pulled = await pullImage(tool, image, node, step, p.conf);
  const second = await lookupImage(tool, image, node, step, p.conf);
  if (second.kind === "found") return { type: "id", value: second.id, request: image.canonical };
  const how = pulled.status
    ? `the pull ended with status ${pulled.status}`
    : `the pull printed no status (exit ${pulled.result.code ?? pulled.result.signal})`;
  throw imageError(
    p,
    `could not be pulled: ${how}; check the name, or run "shifterimg -v pull ${image.canonical}" to see why`,
  );
}

/** True only when the file is known not to exist (an unreadable image store is shifter's business). */
function missing(path: string): boolean {
  try {
    statSync(path);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT";
  }
}

function checkShifter(conf: ShifterConf): void {
  const problem = executableProblem(conf.shifterPath);
  if (problem === undefined) return;
  throw jobrtError(
    "ERR_RUNTIME_COMMAND",
    { problem: `cannot run shifter: ${problem}: install Shifter or set ShifterPath in shifter.conf` },
    {
      details: { runtime: "runtime/shifter", path: conf.shifterPath },
    },
  );
}

/** The step state setup returns: the host journals it and hands it to every later hook of the step. */
const shifter = definePlugin<StepState>(
  {
    name: "shifter",
    type: "runtime/shifter",
    version: packageVersion(import.meta.url),
    capabilities: ["container", "images", "volumes", "modules"],
    accepts: ["value", "volumes", "modules", "env", "workdir", "entrypoint", "clearEnv", "devices"],
  },
  {
    async setup({ node, step }) {
      const p = prepare(node, step);
      if (!p) return undefined;
      checkShifter(p.conf);
      const byName = p.request.image.type === "docker" || p.request.image.type === "custom";
      const shared = byName ? joinPinDir(node, step) : undefined;
      let pinned = shared ? readPin(shared, p.request.image.canonical) : undefined;
      if (pinned) node.log("verbose", `shifter: using the image pinned by another process of this step (${shared})`);
      else {
        pinned = (await pin(p, node, step, "setup")) as PinnedImage;
        if (shared && pinned.type === "id") pinned = writePin(shared, pinned);
      }
      if (pinned.type === "id" && p.udi?.imagePath && missing(join(p.udi.imagePath, `${pinned.value}.meta`))) {
        throw imageError(
          p,
          `resolved to id ${pinned.value}, which has no ${pinned.value}.meta in ${p.udi.imagePath} (udiRoot.conf imagePath): the image is not on this node's image store`,
        );
      }
      node.log(
        "verbose",
        `shifter: ${p.request.image.canonical} pinned to ${pinned.type}:${pinned.value} for step ${step.jobId}.${step.stepId}`,
      );
      return { conf: p.conf, request: p.request, pinned };
    },
    taskInit({ step, state }) {
      if (!state && wantsContainer(step)) {
        throw jobrtError(
          "ERR_RUNTIME_CONTRACT",
          { problem: "shifter taskInit called before a successful setup of this step" },
          { details: { runtime: "runtime/shifter", hook: "taskInit" } },
        );
      }
    },
    run({ step, task, state }) {
      if (!state) {
        if (wantsContainer(step)) {
          throw jobrtError(
            "ERR_RUNTIME_CONTRACT",
            { problem: "shifter run called before a successful setup of this step" },
            { details: { runtime: "runtime/shifter", hook: "run" } },
          );
        }
        return NOT_SUPPORTED;
      }
      return buildExecSpec(state.conf.shifterPath, state.conf, state.request, state.pinned, step, task);
    },
    cleanup({ node, step }) {
      // shifter itself keeps nothing on the node for a step (each instance's mounts die with its
      // namespace); only the shared image pin is ours to remove.
      leavePinDir(node, step);
    },
    tools({ node }) {
      const conf = loadShifterConf(node.confDir, node.hostUid);
      const udi = loadUdiRootConf(conf.udiRootConf, conf.udiRootConfExplicit, node.hostUid);
      return shifterTools(conf, udi, shifterimgPath(conf, udi));
    },
    async check({ node, step }) {
      const p = prepare(node, step);
      if (!p) return [];
      const findings = shifterTools(p.conf, p.udi, shifterimgPath(p.conf, p.udi)).map(toolFinding);
      if (findings.some((f) => f.status === "failed")) return findings;
      const subject = `image ${p.request.image.canonical}`;
      const pinned = await pin(p, node, step, "validate");
      if (!pinned)
        findings.push({
          subject,
          status: "unchecked",
          detail: "not on the image gateway yet: it is pulled at launch (PullPolicy=if-missing)",
        });
      else if (pinned.type === "id" && p.udi?.imagePath && missing(join(p.udi.imagePath, `${pinned.value}.meta`))) {
        findings.push({
          subject,
          status: "failed",
          detail: `resolves to id ${pinned.value}, which has no ${pinned.value}.meta in ${p.udi.imagePath} (udiRoot.conf imagePath): not on this node's image store`,
        });
      } else findings.push({ subject, status: "ok", detail: `resolves to ${pinned.type}:${pinned.value}` });
      return findings;
    },
    async validate({ node, step }) {
      const p = prepare(node, step);
      if (!p) return;
      const pinned = await pin(p, node, step, "validate");
      if (pinned)
        node.log("verbose", `shifter: ${p.request.image.canonical} resolves to ${pinned.type}:${pinned.value}`);
    },
  },
);

export default shifter;
