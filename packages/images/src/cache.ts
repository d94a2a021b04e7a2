import { lstatSync } from "node:fs";
import { join } from "node:path";
import { type NodeConf, type PullProgress, type StepRecord, messageOf } from "@jobrt/core";
import { makeDir, makeDirs } from "@jobrt/host-services";
import type { FetchSpec } from "./fetch.js";
import { policyFlags } from "./policyflags.js";
import { type HelperRequest, type HelperResponse, IMAGE_HELPER } from "./helper.js";
import { type ImageReference, sourceName } from "./reference.js";
import { progressReader } from "./progress.js";
import { type ResolvedImage, imageError, resolveImage, tlsFlags } from "./resolve.js";
import type { ImageSettings } from "./settings.js";
import type { TrustRun } from "./trust.js";
import {
  type StoreEntry,
  addMark,
  dropMark,
  listEntries,
  listStores,
  lockFile,
  markName,
  publicStore,
  useIfPresent,
} from "./store.js";
import { type MountKind, releaseMount } from "./squashmount.js";
import { runTool } from "./tool.js";
import { makeUserStore } from "./userstore.js";

/** An image a step uses: its unpacked bundle in the cache, and what the step must give back. */
export interface CachedImage {
  digest: string;
  /** The cached bundle dir (config.json + read-only rootfs). */
  bundle: string;
  store: string;
  hex: string;
  mark: string;
  /** uid/gid the store belongs to, when that is not the host's own. */
  owner?: { uid: number; gid: number };
  cached: boolean;
  /**
   * Set when `bundle` is the shared store's squashfs mounted on this node (squashmount.ts): the
   * dir whose mnt/ holds the mount (CacheDir for a loop mount, the user's store for squashfuse).
   */
  mountedIn?: string;
  /** How it is mounted; a loop mount when unset (as journaled before squashfuse). */
  mountKind?: MountKind;
}

const hostIsRoot = () => (process.getuid?.() ?? -1) === 0;

/** Variables of the job env that skopeo, running as the job user, may use: their auth file and proxies. */
const USER_VARIABLES = [
  "REGISTRY_AUTH_FILE",
  "XDG_RUNTIME_DIR",
  "DOCKER_CONFIG",
  "CONTAINERS_REGISTRIES_CONF",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
];
const PROXY_VARIABLES = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"];

function toolEnv(
  from: Record<string, string | undefined>,
  names: string[],
  home: string,
  user: string,
): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    USER: user,
    LANG: "C.UTF-8",
  };
  for (const n of names) if (from[n] !== undefined) env[n] = from[n] as string;
  return env;
}

/** skopeo's environment when it runs as the job user: their HOME, auth file and proxies, jobrt's own PATH. */
export function userToolEnv(step: StepRecord): Record<string, string> {
  return toolEnv(step.env, USER_VARIABLES, step.home, step.user);
}

/** Resolves the step's reference to a digest, as the job user. */
export function resolveForStep(step: StepRecord, settings: ImageSettings, ref: ImageReference): Promise<ResolvedImage> {
  const asUser = hostIsRoot() && step.uid !== 0 ? { uid: step.uid, gid: step.gid } : {};
  return resolveImage(ref, settings, { env: userToolEnv(step), ...asUser });
}

/** Lock files are removed with their image: a helper that got an unlinked one locks again (lock.ts). */
const STALE_LOCK_TRIES = 5;

/** Runs the image helper as `as` (else as the host) under the image's lock. */
async function helper(
  request: HelperRequest,
  store: string,
  hex: string,
  as: { uid: number; gid: number } | undefined,
  lock: "wait" | "try",
  timeoutMs: number,
  onStderr?: (chunk: string) => void,
): Promise<HelperResponse | "busy"> {
  for (let tries = 1; ; tries++) {
    const r = await lockedHelper(request, store, hex, as, lock, timeoutMs, onStderr);
    if (r === "busy" || r.ok || !r.staleLock || tries === STALE_LOCK_TRIES) return r;
  }
}

async function lockedHelper(
  request: HelperRequest,
  store: string,
  hex: string,
  as: { uid: number; gid: number } | undefined,
  lock: "wait" | "try",
  timeoutMs: number,
  onStderr?: (chunk: string) => void,
): Promise<HelperResponse | "busy"> {
  const lockArgs = lock === "wait" ? ["-x", "-w", String(Math.ceil(timeoutMs / 1000))] : ["-x", "-n", "-E", "75"];
  const r = await runTool(["flock", ...lockArgs, lockFile(store, hex), process.execPath, IMAGE_HELPER], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C.UTF-8" },
    ...(as ?? {}),
    timeoutMs: timeoutMs + 10_000,
    input: JSON.stringify(request),
    ...(onStderr ? { onStderr } : {}),
  });
  if (lock === "try" && r.code === 75) return "busy";
  try {
    return JSON.parse(r.stdout.toString("utf8")) as HelperResponse;
  } catch {
    const why = r.timedOut
      ? "timed out"
      : r.code === 1 && r.stdout.length === 0 && lock === "wait"
        ? "could not take the image lock in time"
        : `exited with ${r.code ?? r.signal}: ${
            r.stderr
              .trim()
              .split("\n")
              .filter((l) => !l.startsWith("progress "))
              .pop() ?? ""
          }`;
    return { ok: false, error: `image helper ${why}` };
  }
}

/** The store for an image, created when missing: the shared one only for public images pulled by a root host. */
export function storeFor(
  settings: ImageSettings,
  step: StepRecord,
  isPublic: boolean,
): { store: string; owner?: { uid: number; gid: number } } {
  const root = hostIsRoot();
  if (root && isPublic) {
    makeDirs(settings.cacheDir, 0o755);
    makeDir(publicStore(settings.cacheDir), 0o755);
    return { store: publicStore(settings.cacheDir) };
  }
  const uid = root ? step.uid : (process.getuid?.() as number);
  const owner = root && uid !== 0 ? { uid: step.uid, gid: step.gid } : undefined;
  return { store: makeUserStore(settings, uid, owner), ...(owner ? { owner } : {}) };
}

/**
 * Who pulls an image and how: a public one, on a root host, anonymously as root (no one's
 * credentials, root's HOME none); a private one as the job user with their own. The policy's
 * signature check (trust.ts) runs the same way, so it sees what the pull sees.
 */
export function pullAs(
  step: StepRecord,
  settings: ImageSettings,
  ref: ImageReference,
  resolved: ResolvedImage,
): TrustRun {
  const root = hostIsRoot();
  const sharedPull = root && resolved.public;
  const asUser = root && !sharedPull && step.uid !== 0 ? { uid: step.uid, gid: step.gid } : {};
  return {
    copyFlags: [...tlsFlags(ref, settings, "--src-tls-verify"), ...(sharedPull ? ["--src-no-creds"] : [])],
    env: sharedPull ? toolEnv(process.env, PROXY_VARIABLES, "/nonexistent", "root") : userToolEnv(step),
    ...asUser,
  };
}

/** What the image helper is asked to fetch: public images anonymously as root, private ones with the user's credentials. */
export function fetchSpec(
  step: StepRecord,
  settings: ImageSettings,
  ref: ImageReference,
  resolved: ResolvedImage,
  store: string,
  hex: string,
  mark: string,
): FetchSpec {
  const how = pullAs(step, settings, ref, resolved);
  return {
    store,
    hex,
    digest: resolved.digest,
    reference: ref.text,
    source: sourceName(ref, ref.transport === "docker" ? resolved.digest : undefined),
    checkLayoutDigest: ref.transport !== "docker",
    globalFlags: policyFlags(settings),
    copyFlags: how.copyFlags,
    public: resolved.public && hostIsRoot(),
    mark,
    env: how.env,
    timeoutMs: settings.pullTimeoutMs,
  };
}

/**
 * Resolves, pulls (once per node) and unpacks (once per node) the step's image, and marks it in
 * use for this step. Private images are pulled as the job user with their own credentials into
 * their own store; public ones, on a root host, anonymously into the shared store.
 */
export async function ensureImage(
  node: NodeConf,
  step: StepRecord,
  settings: ImageSettings,
  ref: ImageReference,
  resolved: ResolvedImage,
  progress?: (p: PullProgress) => void,
): Promise<CachedImage> {
  const { store, owner } = storeFor(settings, step, resolved.public);
  const hex = resolved.digest.slice("sha256:".length);
  const mark = markName(step.jobId, step.stepId);
  const request: HelperRequest = { op: "fetch", spec: fetchSpec(step, settings, ref, resolved, store, hex, mark) };
  node.log(
    "verbose",
    `runtime oci: image ${ref.text} is ${resolved.digest}${resolved.public ? " (public)" : ""}; cache ${store}`,
  );
  if (!owner) {
    // The host's own store: a cached image needs no helper process and no lock.
    addMark(store, hex, mark, request.spec.public);
    if (useIfPresent(store, hex))
      return { digest: resolved.digest, bundle: join(store, hex), store, hex, mark, cached: true };
  }
  const r = await reportedPull(ref.text, progress, (onStderr) =>
    helper(request, store, hex, owner, "wait", settings.pullTimeoutMs, onStderr),
  );
  if (r === "busy" || !r.ok) throw imageError(ref, r === "busy" ? "busy" : r.error);
  return {
    digest: resolved.digest,
    bundle: join(store, hex),
    store,
    hex,
    mark,
    ...(owner ? { owner } : {}),
    cached: r.cached === true,
  };
}

/**
 * Runs the helper, turning its progress lines into PullProgress reports: `start` with the first
 * line (a helper that finds the image cached, or waits on another step's pull, writes none), then
 * `progress`, and `end` when a pull was reported.
 */
export async function reportedPull<R>(
  image: string,
  progress: ((p: PullProgress) => void) | undefined,
  run: (onStderr?: (chunk: string) => void) => Promise<R>,
): Promise<R> {
  if (!progress) return run();
  const started = performance.now();
  let last: { bytes: number; blobs: number } | undefined;
  const report = (phase: PullProgress["phase"], p: { bytes: number; blobs: number }, ok?: boolean) =>
    progress({
      phase,
      image,
      bytes: p.bytes,
      layers: p.blobs,
      elapsedMs: Math.round(performance.now() - started),
      ...(ok !== undefined ? { ok } : {}),
    });
  const r = await run(
    progressReader((p) => {
      if (!last) report("start", { bytes: 0, blobs: 0 });
      last = p;
      report("progress", p);
    }),
  );
  if (last) report("end", last, r !== "busy" && (r as { ok?: boolean }).ok !== false);
  return r;
}

/** Gives back a step's use of an image (its mark); never throws. */
export async function releaseImage(
  image: Pick<CachedImage, "store" | "hex" | "mark" | "owner" | "mountedIn" | "mountKind">,
  log: (m: string) => void,
): Promise<void> {
  if (image.mountedIn !== undefined) {
    // A job user's squashfuse mount, named by that user's journal when root cleans up their step
    // (jobrt gc): root never goes near it (its daemon could hang root, its dirs are the user's);
    // the user's own `jobrt gc` unmounts it.
    if (image.mountKind === "fuse" && hostIsRoot()) return;
    const problem = await releaseMount(image.mountedIn, image.mountKind ?? "loop", image.hex, image.mark).catch(
      messageOf,
    );
    if (problem) log(`cannot release image ${image.hex}: ${problem}`);
    return;
  }
  if (!image.owner) {
    dropMark(image.store, image.hex, image.mark);
    return;
  }
  const r = await helper(
    { op: "release", store: image.store, hex: image.hex, mark: image.mark },
    image.store,
    image.hex,
    image.owner,
    "wait",
    30_000,
  ).catch((error: unknown) => ({ ok: false as const, error: messageOf(error) }));
  if (r !== "busy" && !r.ok) log(`cannot release image ${image.hex}: ${r.error}`);
}

/** Every image this process can see, least recently used first. */
export function listImages(settings: ImageSettings): StoreEntry[] {
  return listStores(settings.cacheDir)
    .flatMap(listEntries)
    .sort((a, b) => a.lastUsed - b.lastUsed);
}

/** Root may remove from every store (as its owner); a user only from their own. */
export function mayRemove(entry: Pick<StoreEntry, "store">): boolean {
  return hostIsRoot() || lstatSync(entry.store).uid === process.getuid?.();
}

/** Removes one image as its store's owner, unless in use or being pulled. */
export async function removeImage(entry: StoreEntry): Promise<"removed" | "in use" | string> {
  let owner: { uid: number; gid: number } | undefined;
  const st = lstatSync(entry.store);
  if (st.uid !== process.getuid?.()) owner = { uid: st.uid, gid: st.gid };
  const r = await helper(
    { op: "remove", store: entry.store, hex: entry.hex },
    entry.store,
    entry.hex,
    owner,
    "try",
    120_000,
  );
  if (r === "busy") return "in use";
  if (!r.ok) return r.error;
  return r.removed ? "removed" : "in use";
}

/**
 * Keeps the cache under CacheSize: removes least recently used images no running step uses until
 * the total fits (an image in use stays, even past the limit). `keep` is never removed.
 */
export async function evictImages(
  settings: ImageSettings,
  keep: string | undefined,
  log: (m: string) => void,
): Promise<void> {
  const entries = listImages(settings);
  let total = entries.reduce((n, e) => n + e.meta.size, 0);
  for (const e of entries) {
    if (total <= settings.cacheSize) return;
    if (e.dir === keep || e.users.length > 0 || !mayRemove(e)) continue;
    const result = await removeImage(e).catch((error: unknown) => messageOf(error));
    if (result === "removed") {
      total -= e.meta.size;
      log(
        `evicted ${e.meta.reference} (${e.meta.digest}, ${e.meta.size} bytes) from ${e.store}: the cache is over CacheSize=${settings.cacheSize}`,
      );
    } else if (result !== "in use") log(`cannot evict ${e.dir}: ${result}`);
  }
}
