import { createHash } from "node:crypto";
import { type JobrtError, jobrtError } from "@jobrt/core";
import { shownText } from "@jobrt/host-services";
import { policyFlags } from "./policyflags.js";
import { type ImageReference, sourceName } from "./reference.js";
import type { ImageSettings } from "./settings.js";
import { type ToolOptions, runTool, toolMessage } from "./tool.js";

/** What a reference pins to: the image manifest's digest, and whether anyone may pull it. */
export interface ResolvedImage {
  digest: string;
  /** Pullable without credentials: its unpacked form may be shared between users. */
  public: boolean;
}

const INDEX_TYPES = new Set([
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
]);
const GOARCH: Record<string, string> = {
  x64: "amd64",
  arm64: "arm64",
  arm: "arm",
  ia32: "386",
  ppc64: "ppc64le",
  s390x: "s390x",
  riscv64: "riscv64",
  loong64: "loong64",
};

/** A parsed reference holds no white space (reference.ts): shown bare, its other characters escaped. */
export function imageError(ref: ImageReference, why: string): JobrtError {
  return jobrtError(
    "ERR_CONTAINER_IMAGE",
    { problem: `--container-image ${shownText(ref.text)}: ${why}` },
    { details: { runtime: "runtime/oci", key: "--container-image" } },
  );
}

/** skopeo's TLS flag for a registry the site listed in InsecureRegistries. */
export function tlsFlags(ref: ImageReference, settings: ImageSettings, flag: string): string[] {
  return ref.transport === "docker" && settings.insecureRegistries.includes(ref.registry) ? [`${flag}=false`] : [];
}

/** What skopeo says when it spoke TLS to a registry that answers plain HTTP. */
const PLAIN_HTTP = /server gave HTTP response to HTTPS client/;

/** The one-line reason a manifest could not be read; a plain-HTTP registry is told how to allow it. */
function manifestProblem(ref: ImageReference, settings: ImageSettings, stderr: string, message: string): string {
  if (ref.transport !== "docker" || !PLAIN_HTTP.test(stderr)) return `cannot read the image manifest: ${message}`;
  const where = settings.file ?? "images.conf in jobrt's conf dir";
  return `cannot read the image manifest: ${ref.registry} answers plain HTTP, not HTTPS; if the site trusts it, add InsecureRegistries=${ref.registry} to ${where}`;
}

/**
 * Resolves a reference to the digest of one image manifest, fetching only the manifest (`skopeo
 * inspect --raw`), as the job user. A registry is asked anonymously first: an image it serves to
 * anyone is public. Otherwise it is asked with the user's own credentials (their auth file, found
 * by skopeo from the user's HOME/XDG_RUNTIME_DIR/REGISTRY_AUTH_FILE, never from root's). A
 * multi-platform index is pinned to this node's platform's manifest, so the pin names exactly the
 * image that will be unpacked.
 */
export async function resolveImage(
  ref: ImageReference,
  settings: ImageSettings,
  run: Omit<ToolOptions, "timeoutMs">,
): Promise<ResolvedImage> {
  const inspect = (noCreds: boolean) =>
    runTool(
      [
        "skopeo",
        ...policyFlags(settings),
        "inspect",
        "--raw",
        ...tlsFlags(ref, settings, "--tls-verify"),
        ...(noCreds ? ["--no-creds"] : []),
        sourceName(ref),
      ],
      { ...run, timeoutMs: settings.pullTimeoutMs },
    );
  let isPublic = true;
  let r = await inspect(ref.transport === "docker");
  if (
    r.code !== 0 &&
    ref.transport === "docker" &&
    !r.timedOut &&
    !/connection refused|no such host|dial tcp|timeout/i.test(r.stderr) &&
    !PLAIN_HTTP.test(r.stderr)
  ) {
    isPublic = false;
    r = await inspect(false);
  }
  if (r.timedOut)
    throw imageError(
      ref,
      `cannot read the image manifest: the registry did not answer within ${settings.pullTimeoutMs / 1000} s (PullTimeout in images.conf); skopeo inspect timed out and was killed`,
    );
  if (r.code !== 0) throw imageError(ref, manifestProblem(ref, settings, r.stderr, toolMessage(r)));
  let digest = `sha256:${createHash("sha256").update(r.stdout).digest("hex")}`;
  if (ref.transport === "docker" && ref.digest && ref.digest !== digest) {
    throw imageError(ref, `the registry returned a manifest whose digest is ${digest}, not ${ref.digest}`);
  }
  let manifest: {
    mediaType?: string;
    manifests?: { digest?: string; platform?: { os?: string; architecture?: string } }[];
  };
  try {
    manifest = JSON.parse(r.stdout.toString("utf8"));
  } catch {
    throw imageError(ref, "the image manifest is not JSON");
  }
  if (INDEX_TYPES.has(manifest.mediaType ?? "") || Array.isArray(manifest.manifests)) {
    const arch = GOARCH[process.arch] ?? process.arch;
    const entry = manifest.manifests?.find((m) => m.platform?.os === "linux" && m.platform.architecture === arch);
    if (!entry?.digest) throw imageError(ref, `the image index has no linux/${arch} image`);
    digest = entry.digest;
  }
  return { digest, public: isPublic && ref.transport === "docker" };
}
