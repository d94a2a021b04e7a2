import { type NodeConf, type PullProgress, type StepRecord, jobrtError, messageOf } from "@jobrt/core";
import { type CachedImage, ensureImage, resolveForStep } from "./cache.js";
import { jobPinFile, readJobPin, writeJobPin } from "./jobpin.js";
import type { ImageReference } from "./reference.js";
import type { ResolvedImage } from "./resolve.js";
import type { ImageSettings } from "./settings.js";
import { prepareSharedStore, sharedStoreProblem } from "./shared.js";
import { ensureShared } from "./sharedpull.js";
import { mountShared } from "./squashmount.js";
import { markName } from "./store.js";

const hostIsRoot = () => (process.getuid?.() ?? -1) === 0;

/**
 * Whether this host uses the shared store: it is set, this host is root (it writes the store and
 * loop-mounts its squashfs files), and root may use it (shared.ts: no dir on the way a job user
 * controls, else ERR_CONF). Otherwise the reason it does not, for `-v` and `jobrt check`.
 */
export function sharedStoreUse(settings: ImageSettings): { use: true; root: string } | { use: false; why: string } {
  if (!settings.sharedStore) return { use: false, why: "no SharedStore in images.conf" };
  if (!hostIsRoot())
    return {
      use: false,
      why: `SharedStore ${settings.sharedStore} needs a root host (it loop-mounts the squashfs images); using the node cache's unpacked tree`,
    };
  const problem = sharedStoreProblem(settings.sharedStore);
  if (problem)
    throw jobrtError(
      "ERR_CONF",
      {
        where: settings.file ?? "images.conf",
        problem: `${problem}: root does not use a store a job user could redirect`,
      },
      { details: { key: "SharedStore" } },
    );
  return { use: true, root: settings.sharedStore };
}

/**
 * The digest the step runs: the one another node of this job step recorded in the shared store,
 * else this node's resolution, recorded for the others (jobpin.ts). Without a usable shared store,
 * this node's resolution.
 */
export async function resolveForJob(
  node: NodeConf,
  step: StepRecord,
  settings: ImageSettings,
  ref: ImageReference,
): Promise<ResolvedImage> {
  const shared = sharedStoreUse(settings);
  if (!shared.use) return resolveForStep(step, settings, ref);
  prepareSharedStore(shared.root);
  const file = jobPinFile(shared.root, settings.clusterName, step, ref.text);
  const pinned = readJobPin(file, ref.text);
  if (pinned) {
    node.log(
      "verbose",
      `images: ${ref.text} is ${pinned.digest}, pinned for job ${step.jobId} step ${step.stepId} by another node (${file})`,
    );
    return pinned;
  }
  return writeJobPin(shared.root, settings.clusterName, file, ref.text, await resolveForStep(step, settings, ref));
}

/**
 * The image a step runs from: a public image, with a usable shared store, is the store's squashfs
 * mounted on this node; otherwise (a private image, a rootless host, a mount that failed) the node
 * cache's unpacked tree. Which one is said in `-v`.
 */
export async function acquireImage(
  node: NodeConf,
  step: StepRecord,
  settings: ImageSettings,
  ref: ImageReference,
  resolved: ResolvedImage,
  progress?: (p: PullProgress) => void,
): Promise<CachedImage> {
  const shared = sharedStoreUse(settings);
  if (!shared.use || !resolved.public) {
    node.log(
      "verbose",
      `images: ${ref.text}: node cache (${shared.use ? "a private image stays in its user's node cache" : shared.why})`,
    );
    return ensureImage(node, step, settings, ref, resolved, progress);
  }
  const hex = resolved.digest.slice("sha256:".length);
  const { file, cached } = await ensureShared(node, step, settings, ref, resolved, progress);
  const mark = markName(step.jobId, step.stepId);
  let bundle: string;
  try {
    bundle = await mountShared(settings.cacheDir, file, hex, mark, { store: shared.root, node: node.nodeName });
  } catch (error) {
    node.log(
      "verbose",
      `images: ${ref.text}: cannot mount ${file} (${messageOf(error)}); using the node cache's unpacked tree`,
    );
    return ensureImage(node, step, settings, ref, resolved, progress);
  }
  node.log("verbose", `images: ${ref.text}: shared store squashfs ${file}, mounted read-only at ${bundle}`);
  return { digest: resolved.digest, bundle, store: shared.root, hex, mark, cached, mountedIn: settings.cacheDir };
}
