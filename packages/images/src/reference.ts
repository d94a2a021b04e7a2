import { isAbsolute } from "node:path";
import { type JobrtError, jobrtError } from "@jobrt/core";
import { quotedText } from "@jobrt/host-services";

/**
 * A `--container-image` reference, in the transports skopeo reads: `docker://host[:port]/name[:tag]`
 * or `docker://host[:port]/name@sha256:<hex>` (a registry), `oci:/path[:ref]` (an OCI layout
 * directory) and `oci-archive:/path[:ref]` (a tar of one). Registry references must name their
 * registry host: jobrt never guesses a default registry, so a site's image names mean the same
 * thing on every node.
 */
export type ImageReference =
  | { transport: "docker"; text: string; registry: string; repository: string; tag?: string; digest?: string }
  | { transport: "oci" | "oci-archive"; text: string; path: string; ref?: string };

export const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;
const REGISTRY_RE =
  /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]{1,5})?$|^\[[0-9a-fA-F:]+\](?::[0-9]{1,5})?$/;
const COMPONENT_RE = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

function bad(text: string, why: string): JobrtError {
  return jobrtError(
    "ERR_CONTAINER_IMAGE",
    { problem: `--container-image ${quotedText(text)}: ${why}` },
    { details: { runtime: "runtime/oci", key: "--container-image" } },
  );
}

/** Parses a `--container-image` value; a malformed one is an ERR_CONTAINER_IMAGE naming the rule. */
export function parseImageReference(text: string): ImageReference {
  if (/[\s\0]/.test(text)) throw bad(text, "must not contain white space or NUL");
  if (text.startsWith("docker://")) return parseDocker(text, text.slice("docker://".length));
  for (const transport of ["oci-archive", "oci"] as const) {
    const prefix = `${transport}:`;
    if (!text.startsWith(prefix)) continue;
    const rest = text.slice(prefix.length);
    // skopeo's own rule: the path ends at the first ':' (a path holding ':' cannot be named).
    const colon = rest.indexOf(":");
    const path = colon < 0 ? rest : rest.slice(0, colon);
    const ref = colon < 0 ? undefined : rest.slice(colon + 1);
    if (!isAbsolute(path)) throw bad(text, `${transport}: needs an absolute path`);
    if (ref !== undefined && !TAG_RE.test(ref))
      throw bad(text, `${quotedText(ref)} is not a valid image reference name`);
    return { transport, text, path, ...(ref !== undefined ? { ref } : {}) };
  }
  throw bad(
    text,
    "expected docker://HOST[:PORT]/NAME[:TAG|@sha256:DIGEST], oci:/PATH[:REF] or oci-archive:/PATH[:REF]",
  );
}

/**
 * `docker://user:pw@host/...`: credentials would show in ps, logs and the step's record. Refused
 * without echoing them, saying where they go: the pull runs skopeo as the job user, which reads
 * their registry auth file (docs/runtime-oci.md, "Security model of the image cache").
 */
function refuseCredentials(rest: string): void {
  const host = rest.split("/", 1)[0]!;
  const at = host.lastIndexOf("@");
  if (at < 0) return;
  const shown = `docker://<credentials>@${rest.slice(at + 1)}`;
  throw bad(
    shown,
    "credentials do not go in an image reference (ps, logs and records would show them): log in as the job user (`skopeo login HOST`, or podman or docker login), and the pull reads their registry auth file ($REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json, ~/.config/containers/auth.json or ~/.docker/config.json)",
  );
}

function parseDocker(text: string, rest: string): ImageReference {
  refuseCredentials(rest);
  let digest: string | undefined;
  const at = rest.indexOf("@");
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST_RE.test(digest)) throw bad(text, `${quotedText(digest)} is not a sha256:<64 hex digits> digest`);
  }
  const slash = rest.indexOf("/");
  if (slash <= 0) throw bad(text, "needs a registry host: docker://HOST[:PORT]/NAME[:TAG]");
  const registry = rest.slice(0, slash);
  let name = rest.slice(slash + 1);
  if (!REGISTRY_RE.test(registry) || !(registry.includes(".") || registry.includes(":") || registry === "localhost")) {
    throw bad(
      text,
      `${quotedText(registry)} is not a registry host (a name with a dot or a port, or localhost): jobrt never guesses a default registry`,
    );
  }
  let tag: string | undefined;
  const lastColon = name.lastIndexOf(":");
  if (lastColon > name.lastIndexOf("/")) {
    tag = name.slice(lastColon + 1);
    name = name.slice(0, lastColon);
    if (!TAG_RE.test(tag)) throw bad(text, `${quotedText(tag)} is not a valid tag`);
  }
  if (name === "" || !name.split("/").every((c) => COMPONENT_RE.test(c)))
    throw bad(text, `${quotedText(name)} is not a valid repository name (lower-case components separated by '/')`);
  if (tag === undefined && digest === undefined) tag = "latest";
  return {
    transport: "docker",
    text,
    registry,
    repository: name,
    ...(tag !== undefined ? { tag } : {}),
    ...(digest !== undefined ? { digest } : {}),
  };
}

/** The reference skopeo reads, pinned to `digest` for a registry (tags can move; digests cannot). */
export function sourceName(ref: ImageReference, digest?: string): string {
  if (ref.transport === "docker") {
    const base = `docker://${ref.registry}/${ref.repository}`;
    if (digest) return `${base}@${digest}`;
    return ref.digest ? `${base}@${ref.digest}` : `${base}:${ref.tag}`;
  }
  return `${ref.transport}:${ref.path}${ref.ref !== undefined ? `:${ref.ref}` : ""}`;
}
