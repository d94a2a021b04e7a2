import { chmodSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type JobrtError, jobrtError } from "@jobrt/core";
import { removeTree } from "@jobrt/host-services";
import { prepareImageConfig } from "./imageconfig.js";
import { type ImageMeta, addMark, dropMark, useIfPresent } from "./store.js";
import { layoutProgress, progressLine } from "./progress.js";
import { runTool, toolMessage } from "./tool.js";

/** What the image helper is asked to make sure of, as the store's owner and under `<hex>.lock`. */
export interface FetchSpec {
  store: string;
  hex: string;
  digest: string;
  /** The reference as the user wrote it (for `jobrt images list`). */
  reference: string;
  /** What skopeo copies: a registry image by digest, or a local layout. */
  source: string;
  /** Local layouts cannot be copied by digest: the copy is checked against it instead. */
  checkLayoutDigest: boolean;
  /** skopeo's global flags: the site's trust policy and registries.d (policyflags.ts). */
  globalFlags: string[];
  /** Extra skopeo copy flags (TLS for InsecureRegistries, --src-no-creds for public pulls). */
  copyFlags: string[];
  public: boolean;
  /** This step's in-use mark (store.markName). */
  mark: string;
  env: Record<string, string>;
  timeoutMs: number;
}

export interface FetchResult {
  cached: boolean;
  size: number;
}

/**
 * A pull or unpack that went wrong. The message is bare (no `--container-image REF:`): through the
 * helper it reaches the caller as text, which cache.ts prefixes with the reference (imageError).
 */
function fetchError(problem: string): JobrtError {
  return jobrtError("ERR_CONTAINER_IMAGE", { problem }, { details: { key: "--container-image" } });
}

const PROGRESS_EVERY_MS = 250;

/**
 * Marks the image in use, then pulls and unpacks it unless it is already there. A pull is made in
 * `.tmp/` and renamed into place only once complete, so an image dir is never half there; every
 * failure removes what it made (and the mark), leaving the cache as it was.
 */
export async function fetchImage(spec: FetchSpec, report?: (line: string) => void): Promise<FetchResult> {
  addMark(spec.store, spec.hex, spec.mark, spec.public);
  try {
    const meta = useIfPresent(spec.store, spec.hex);
    if (meta) return { cached: true, size: meta.size };
    return { cached: false, size: await pullAndUnpack(spec, join(spec.store, spec.hex), report) };
  } catch (error) {
    dropMark(spec.store, spec.hex, spec.mark);
    throw error;
  }
}

async function pullAndUnpack(spec: FetchSpec, entry: string, report?: (line: string) => void): Promise<number> {
  const tmpRoot = join(spec.store, ".tmp");
  mkdirSync(tmpRoot, { recursive: true, mode: 0o700 });
  // What a killed pull of this image left (no other pull of it runs: we hold its lock).
  for (const n of readdirSync(tmpRoot)) if (n.startsWith(`${spec.hex}.`)) removeTree(join(tmpRoot, n));
  const tmp = join(tmpRoot, `${spec.hex}.${process.pid}.${Date.now().toString(36)}`);
  mkdirSync(tmp, { mode: 0o700 });
  try {
    const layout = join(tmp, "layout");
    const env = { ...spec.env, TMPDIR: tmp };
    await copyToLayout(spec, layout, env, report);
    const entrypoint = checkLayout(layout, spec);
    const bundle = join(tmp, "bundle");
    const unpack = await runTool(["umoci", "unpack", "--rootless", "--image", `${layout}:img`, bundle], {
      env,
      timeoutMs: spec.timeoutMs,
    });
    if (unpack.code !== 0) throw fetchError(`umoci unpack failed: ${toolMessage(unpack)}`);
    for (const name of readdirSync(bundle))
      if (name !== "rootfs" && name !== "config.json") removeTree(join(bundle, name));
    const rootfs = join(bundle, "rootfs");
    const size = harden(rootfs, spec.public);
    const configFile = join(bundle, "config.json");
    const config = prepareImageConfig(JSON.parse(readFileSync(configFile, "utf8")), rootfs, entrypoint);
    writeFileSync(configFile, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o644 });
    chmodSync(configFile, spec.public ? 0o644 : 0o600);
    const meta: ImageMeta = {
      reference: spec.reference,
      digest: spec.digest,
      size,
      pulledAt: new Date().toISOString(),
      entrypoint,
      public: spec.public,
    };
    writeFileSync(join(bundle, "image.json"), `${JSON.stringify(meta, null, 2)}\n`, { mode: 0o644 });
    chmodSync(bundle, spec.public ? 0o755 : 0o700);
    renameSync(bundle, entry);
    return size;
  } finally {
    removeTree(tmp);
  }
}

/** `skopeo copy` of the image into an OCI layout, reporting how far it got from what it wrote. */
async function copyToLayout(
  spec: FetchSpec,
  layout: string,
  env: Record<string, string>,
  report?: (line: string) => void,
): Promise<void> {
  // How far the copy got, from what it wrote (the helper's own dir): skopeo --quiet says nothing.
  const sample = () => report?.(progressLine(layoutProgress(layout)));
  const timer = report ? setInterval(sample, PROGRESS_EVERY_MS) : undefined;
  // skopeo evaluates the policy on the source, signatures included, before it copies anything;
  // an OCI layout cannot hold them, so they are not copied (else every signed image fails).
  const copy = await runTool(
    [
      "skopeo",
      ...spec.globalFlags,
      "copy",
      "--quiet",
      "--remove-signatures",
      ...spec.copyFlags,
      spec.source,
      `oci:${layout}:img`,
    ],
    { env, timeoutMs: spec.timeoutMs },
  ).finally(() => clearInterval(timer));
  sample();
  if (copy.code !== 0) throw fetchError(`skopeo copy failed: ${toolMessage(copy)}`);
}

/**
 * The copied layout must hold one image; a local layout's must be the pinned one (a registry
 * image was copied by digest, which skopeo verifies, as it verifies every blob). Returns the
 * image config's Entrypoint.
 */
function checkLayout(layout: string, spec: FetchSpec): string[] {
  const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8")) as { manifests?: { digest?: string }[] };
  const manifests = index.manifests ?? [];
  if (manifests.length !== 1 || typeof manifests[0]?.digest !== "string")
    throw fetchError(`the copied image has ${manifests.length} manifests, expected 1`);
  const digest = manifests[0].digest;
  if (spec.checkLayoutDigest && digest !== spec.digest)
    throw fetchError(`the copied image is ${digest}, not the pinned ${spec.digest} (the layout changed meanwhile)`);
  const blob = (d: string) =>
    JSON.parse(readFileSync(join(layout, "blobs", ...d.split(":")), "utf8")) as Record<string, unknown>;
  const manifest = blob(digest) as { config?: { digest?: string } };
  const configDigest = manifest.config?.digest;
  if (typeof configDigest !== "string" || !/^sha256:[0-9a-f]{64}$/.test(configDigest))
    throw fetchError("the image manifest names no config");
  const entrypoint = (blob(configDigest) as { config?: { Entrypoint?: unknown } }).config?.Entrypoint;
  return Array.isArray(entrypoint) && entrypoint.every((a) => typeof a === "string") ? entrypoint : [];
}

/**
 * Makes an unpacked rootfs safe to keep on the host, and returns its size on disk. Set-id bits go
 * (a set-uid-root binary in a cache others can reach would hand out root; inside a rootless
 * container they do nothing anyway); in a shared store group/other write bits go too, so no user
 * can change what another user's container runs (containers get a tmpfs /tmp instead).
 */
function harden(rootfs: string, shared: boolean): number {
  const strip = shared ? 0o6022 : 0o6000;
  let size = 0;
  const walk = (p: string): void => {
    const st = lstatSync(p);
    size += st.blocks * 512;
    if (st.isSymbolicLink()) return;
    if ((st.mode & strip) !== 0) chmodSync(p, st.mode & 0o7777 & ~strip);
    if (st.isDirectory()) for (const n of readdirSync(p)) walk(join(p, n));
  };
  walk(rootfs);
  return size;
}
