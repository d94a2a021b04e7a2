import { type NodeConf, type PullProgress, type StepRecord, messageOf } from "@jobrt/core";
import { type CachedImage, ensureImage, resolveForStep, storeFor } from "./cache.js";
import { fuseProblem } from "./fuse.js";
import { jobPinFile, readJobPin, writeJobPin } from "./jobpin.js";
import type { ImageReference } from "./reference.js";
import type { ResolvedImage } from "./resolve.js";
import type { ImageSettings } from "./settings.js";
import { prepareSharedStore, sharedMeta, sharedStoreError, sharedStoreProblem, squashFile } from "./shared.js";
import { ensureShared } from "./sharedpull.js";
import { type MountKind, mountShared } from "./squashmount.js";
import { markName } from "./store.js";

const hostIsRoot = () => (process.getuid?.() ?? -1) === 0;

/**
 * Whether this host uses the shared store, and how it mounts its squashfs images: a root host
 * pulls into it and loop-mounts; a rootless one runs what is already there through squashfuse,
 * when FUSE is usable here. Root refuses a store a job user could redirect (shared.ts: ERR_CONF);
 * a rootless host just does without it. Otherwise the reason it does not, for `-v` and `jobrt
 * check`.
 */
export function sharedStoreUse(
  settings: ImageSettings,
): { use: true; root: string; mount: MountKind } | { use: false; why: string } {
  if (!settings.sharedStore) return { use: false, why: "no SharedStore in images.conf" };
  const problem = sharedStoreProblem(settings.sharedStore);
  if (!hostIsRoot()) {
    const why = problem ?? fuseProblem();
    return why
      ? {
          use: false,
          why: `a rootless jobrt cannot mount SharedStore ${settings.sharedStore}'s squashfs images with squashfuse: ${why}; using the node cache's unpacked tree`,
        }
      : { use: true, root: settings.sharedStore, mount: "fuse" };
  }
  if (problem) throw sharedStoreError(settings, problem);
  return { use: true, root: settings.sharedStore, mount: "loop" };
}

/**
 * The digest the step runs: the one another node of this job step recorded in the shared store,
 * else, for a reference by digest whose squashfs is in the store, that digest (a public image:
 * only those go in), else this node's resolution, recorded for the others (jobpin.ts). Neither
 * of the first two asks the registry. Without a usable shared store, this node's resolution; a
 * rootless host reads no pins (they are root's).
 */
export async function resolveForJob(
  node: NodeConf,
  step: StepRecord,
  settings: ImageSettings,
  ref: ImageReference,
): Promise<ResolvedImage> {
  const shared = sharedStoreUse(settings);
  if (!shared.use) return resolveForStep(step, settings, ref);
  const stored = ref.transport === "docker" && ref.digest ? storedDigest(shared.root, ref.digest) : undefined;
  if (shared.mount === "fuse") return stored ?? resolveForStep(step, settings, ref);
  prepareSharedStore(settings, shared.root);
  const file = jobPinFile(shared.root, settings.clusterName, step, ref.text);
  const pinned = readJobPin(file, ref.text);
  if (pinned) {
    node.log(
      "verbose",
      `images: ${ref.text} is ${pinned.digest}, pinned for job ${step.jobId} step ${step.stepId} by another node (${file})`,
    );
    return pinned;
  }
  const resolved = stored ?? (await resolveForStep(step, settings, ref));
  return writeJobPin(shared.root, settings.clusterName, file, ref.text, resolved);
}

/** A digest whose squashfs is complete in the store: public, and the image manifest's own. */
function storedDigest(root: string, digest: string): ResolvedImage | undefined {
  return sharedMeta(root, digest.slice("sha256:".length), false) ? { digest, public: true } : undefined;
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
  if (shared.mount === "fuse") return fuseImage(node, step, settings, ref, resolved, shared.root, progress);
  const hex = resolved.digest.slice("sha256:".length);
  const { file, cached } = await ensureShared(node, step, settings, ref, resolved, progress);
  const mark = markName(step.jobId, step.stepId);
  let bundle: string;
  try {
    bundle = await mountShared(settings.cacheDir, "loop", file, hex, mark, { store: shared.root, node: node.nodeName });
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

/**
 * A rootless host's image from the store: the squashfs mounted with squashfuse under the user's
 * own node-cache store, when a root host already put it there (a rootless one cannot write the
 * store); else, or when the mount fails, the user's node cache.
 */
async function fuseImage(
  node: NodeConf,
  step: StepRecord,
  settings: ImageSettings,
  ref: ImageReference,
  resolved: ResolvedImage,
  root: string,
  progress?: (p: PullProgress) => void,
): Promise<CachedImage> {
  const hex = resolved.digest.slice("sha256:".length);
  const file = squashFile(root, hex);
  const fallBack = (why: string) => {
    node.log("verbose", `images: ${ref.text}: node cache (${why})`);
    return ensureImage(node, step, settings, ref, resolved, progress);
  };
  if (!sharedMeta(root, hex, false))
    return fallBack(
      `${resolved.digest} is not in the shared store ${root}, and a rootless jobrt does not pull into it`,
    );
  const base = storeFor(settings, step, false).store;
  const mark = markName(step.jobId, step.stepId);
  let bundle: string;
  try {
    bundle = await mountShared(base, "fuse", file, hex, mark);
  } catch (error) {
    return fallBack(`cannot mount ${file} with squashfuse: ${messageOf(error)}`);
  }
  node.log(
    "verbose",
    `images: ${ref.text}: shared store squashfs ${file}, mounted read-only with squashfuse at ${bundle}`,
  );
  return { digest: resolved.digest, bundle, store: root, hex, mark, cached: true, mountedIn: base, mountKind: "fuse" };
}
