import { join, resolve } from "node:path";
import {
  type CheckContext,
  type CheckFinding,
  type NodeConf,
  type RuntimeTool,
  type StepRecord,
  containerImage,
  messageOf,
} from "@jobrt/core";
import { type BundleConfig, fitRootless, parseBundleConfig } from "./bundle.js";
import type { OciConf } from "./conf.js";
import { type FileOpResult, type FileUser, runFileOps } from "@jobrt/host-services";
import { imagesModule } from "./image/request.js";
import { identityFor } from "./ocistepstate.js";
import { hostMpiProblem } from "./hostmpi.js";
import { pmixUserProblem } from "./pmixuser.js";
import { resolveConf } from "./resolveconf.js";
import { type UnnamedProgram, ociTools } from "./tools.js";

/**
 * `jobrt check` of runtime oci (docs/cli.md, "jobrt check"): what this node can see of a
 * request. Every file is looked at as setup would read it: as the job user (runFileOps), never
 * following a symlink in the last component.
 */

/** A tool as a finding: usable (with its path and version) or not. */
export function toolFinding(tool: RuntimeTool): CheckFinding {
  const subject = `tool ${tool.name} (${tool.source})`;
  if (tool.problem !== undefined) return { subject, status: "failed", detail: tool.problem };
  return {
    subject,
    status: "ok",
    detail: `${tool.path ?? tool.name}, version ${tool.version ?? "unknown (it printed none for --version)"}`,
  };
}

export function unnamedFinding(u: UnnamedProgram): CheckFinding {
  return {
    subject: `${u.key} program`,
    status: "unchecked",
    detail: `the first word of ${JSON.stringify(u.command)} is a pattern or shell syntax: the program is known only when the command runs`,
  };
}

/** Looks at `path` as a directory: reading `path/.` opens it (following `path` itself, as runc does) and fails as no regular file. */
function dirState(r: FileOpResult): "dir" | "missing" | "not a directory" | string {
  if (r.ok) return "not a directory";
  if (r.code === "ENOENT") return "missing";
  if (r.code === "ENOTDIR") return "not a directory";
  return /is not a regular file$/.test(r.error) ? "dir" : r.error;
}

function dirFinding(subject: string, r: FileOpResult, missingHint: string, as: FileUser | undefined): CheckFinding {
  const state = dirState(r);
  if (state === "dir") return { subject, status: "ok", detail: "a directory" };
  if (state === "missing") return { subject, status: "failed", detail: `no such directory on this node${missingHint}` };
  return { subject, status: "failed", detail: `${state}${as ? ` (looked at as uid ${as.uid})` : ""}` };
}

/** `dir/.`: opening it follows `dir` itself (a symlinked bundle is fine, as for runc); path.join would drop the dot. */
const inside = (dir: string) => `${dir.replace(/\/+$/, "")}/.`;

/**
 * The bundle dir, its config.json (parsed as setup parses it) and the rootfs it names. `rootless`:
 * the job user's ids when the embedded default will run rootless runc, which needs a user namespace.
 */
export async function bundleFindings(
  bundle: string,
  conf: OciConf,
  as: FileUser | undefined,
  rootless?: FileUser,
  step?: Pick<StepRecord, "env" | "uid" | "container">,
): Promise<CheckFinding[]> {
  const file = join(bundle, "config.json");
  const [dir, config] = runFileOps(
    [
      { op: "read", path: inside(bundle) },
      { op: "read", path: file },
    ],
    as,
  );
  const findings = [
    dirFinding(`bundle ${bundle}`, dir as FileOpResult, " (--container names an OCI bundle directory)", as),
  ];
  if (findings[0]?.status === "failed") return findings;
  if (conf.ignoreFileConfigJson) {
    findings.push({
      subject: file,
      status: "unchecked",
      detail: `${conf.file} sets IgnoreFileConfigJson=true: the runtime command alone knows the rootfs`,
    });
    return findings;
  }
  const r = config as FileOpResult;
  if (!r.ok) {
    findings.push({
      subject: file,
      status: "failed",
      detail: r.code === "ENOENT" ? "no such file (an OCI bundle has a config.json)" : r.error,
    });
    return findings;
  }
  let parsed: BundleConfig;
  try {
    parsed = parseBundleConfig(r.value as string, file, bundle);
    const problem = rootless ? fitRootless(parsed.config, rootless.uid, rootless.gid) : undefined;
    if (problem) throw new Error(`${file}: ${problem}`);
  } catch (error) {
    findings.push({ subject: file, status: "failed", detail: messageOf(error) });
    return findings;
  }
  findings.push({ subject: file, status: "ok", detail: "parses, names root.path" });
  const rootfs = parsed.rootfs;
  const [root] = runFileOps([{ op: "read", path: inside(rootfs) }], as);
  findings.push(dirFinding(`rootfs ${rootfs}`, root as FileOpResult, ` (root.path in ${file})`, as));
  const pmix = step && pmixUserProblem(parsed.config, step);
  if (pmix) findings.push({ subject: "PMIx client", status: "failed", detail: `jobrt exec refuses: ${pmix}` });
  const edits = step?.container?.deviceEdits;
  const mpi = edits && hostMpiProblem(rootfs, parsed.config, edits, as, bundle);
  if (mpi) findings.push({ subject: "host MPI", status: "failed", detail: `jobrt exec refuses: ${mpi}` });
  return findings;
}

/**
 * An image request: its reference resolved (as setup would, as the job user), and whether this
 * node's cache holds it already; one that is not pulled yet cannot be looked at before a step pulls it.
 */
export async function imageFindings(node: NodeConf, step: StepRecord, text: string): Promise<CheckFinding[]> {
  const subject = `image ${text}`;
  const { listImages, loadImageSettings, parseImageReference, resolveForStep } = await imagesModule();
  const settings = loadImageSettings(node.confDir);
  let digest: string;
  try {
    digest = (await resolveForStep(step, settings, parseImageReference(text))).digest;
  } catch (error) {
    return [{ subject, status: "failed", detail: messageOf(error) }];
  }
  const cached = listImages(settings).find((e) => e.meta.digest === digest);
  if (!cached)
    return [
      {
        subject,
        status: "unchecked",
        detail: `resolves to ${digest}, not pulled on this node yet: its bundle and rootfs are made when a step pulls it`,
      },
    ];
  return [{ subject, status: "ok", detail: `resolves to ${digest}, cached in ${cached.dir}` }];
}

/** What this node can see of a request: the tools its commands run, the bundle or the image. */
export async function check({ node, step }: CheckContext): Promise<CheckFinding[]> {
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
  const ref = containerImage(c, "runtime/oci");
  if (ref !== undefined) findings.push(...(await imageFindings(node, step, ref)));
  else {
    // The embedded default runs rootless runc for a job user: setup fits config.json to it (fitRootless).
    const rootless = conf.embedded && step.uid !== 0 ? { uid: step.uid, gid: step.gid } : undefined;
    const dir = resolve(step.cwd, c.value ?? "");
    findings.push(...(await bundleFindings(dir, conf, identityFor(step), rootless, step)));
  }
  return findings;
}
