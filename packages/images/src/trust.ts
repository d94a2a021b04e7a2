import { readFileSync } from "node:fs";
import { type JobrtError, jobrtError, messageOf } from "@jobrt/core";
import { shownText } from "@jobrt/host-services";
import { policyFlags } from "./policyflags.js";
import type { ImageReference } from "./reference.js";
import { sourceName } from "./reference.js";
import { imageError } from "./resolve.js";
import type { ImageSettings } from "./settings.js";
import { type ToolOptions, runTool, toolMessage } from "./tool.js";

/** One requirement of containers-policy.json(5): `insecureAcceptAnything`, `reject`, `signedBy`, `sigstoreSigned`, … */
export interface PolicyRequirement {
  type?: unknown;
  keyPath?: unknown;
  keyPaths?: unknown;
}

/** The parts of a policy.json that decide a reference. */
export interface TrustPolicy {
  file: string;
  default?: PolicyRequirement[];
  transports?: Record<string, Record<string, PolicyRequirement[]>>;
}

/** What the policy says of one image: yes, no (and why), or that its signatures must be verified. */
export type TrustDecision =
  | { verdict: "allow"; scope: string }
  | { verdict: "deny"; scope: string; requirement: string; why: string }
  | { verdict: "verify"; scope: string; requirements: PolicyRequirement[] };

/** Reads the site's policy; a missing or malformed one is an ERR_CONF naming it and the key. */
export function loadTrustPolicy(settings: ImageSettings): TrustPolicy {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(settings.trustPolicy, "utf8"));
  } catch (error) {
    throw jobrtError(
      "ERR_CONF",
      {
        where: settings.trustPolicy,
        problem: `cannot read the image trust policy (TrustPolicy in ${settings.file ?? "images.conf"}): ${messageOf(error)}`,
      },
      { details: { file: settings.trustPolicy, key: "TrustPolicy" } },
    );
  }
  const d = (typeof doc === "object" && doc !== null ? doc : {}) as Omit<TrustPolicy, "file">;
  return { file: settings.trustPolicy, ...d };
}

/**
 * The scopes containers/image looks a reference up in, most specific first (its docker and OCI
 * transports' PolicyConfigurationIdentity and Namespaces): the image by digest, as jobrt pulls it
 * (`host/repo@sha256:…`), the repository and each namespace above it, the host, `*.domain`
 * wildcards; for a local layout its path with and without the ref, and the dirs above it.
 */
export function policyScopes(ref: ImageReference, digest: string): { transport: string; scopes: string[] } {
  if (ref.transport !== "docker") {
    const scopes = ref.ref !== undefined ? [`${ref.path}:${ref.ref}`] : [];
    for (let p = ref.path.replace(/\/+$/, ""); p !== "" && p !== "/"; p = p.slice(0, p.lastIndexOf("/")))
      scopes.push(p);
    return { transport: ref.transport, scopes };
  }
  const repository =
    ref.registry === "docker.io" && !ref.repository.includes("/") ? `library/${ref.repository}` : ref.repository;
  let name = `${ref.registry}/${repository}`;
  const scopes = [`${name}@${digest}`];
  for (;;) {
    scopes.push(name);
    const slash = name.lastIndexOf("/");
    if (slash < 0) break;
    name = name.slice(0, slash);
  }
  let host = name.replace(/:[0-9]+$/, "");
  for (let dot = host.indexOf("."); dot >= 0; dot = host.indexOf(".")) {
    host = host.slice(dot + 1);
    scopes.push(`*.${host}`);
  }
  return { transport: "docker", scopes };
}

/**
 * The pure decision (docs/images.md, "Trust"): the requirements of the most specific scope that
 * names the image must all hold. `reject` refuses and `insecureAcceptAnything` accepts without
 * asking anyone; any other requirement (a signature) is for skopeo to verify.
 */
export function trustDecision(ref: ImageReference, digest: string, policy: TrustPolicy): TrustDecision {
  const { transport, scopes } = policyScopes(ref, digest);
  const table = policy.transports?.[transport] ?? {};
  const found = scopes.find((s) => Array.isArray(table[s]));
  const [scope, requirements] =
    found !== undefined
      ? [`transports.${transport}."${found}"`, table[found] as PolicyRequirement[]]
      : Array.isArray(table[""])
        ? [`transports.${transport}.""`, table[""]]
        : ["default", policy.default ?? []];
  if (requirements.length === 0)
    return {
      verdict: "deny",
      scope,
      requirement: "(none)",
      why: "has no requirement, which the policy format refuses",
    };
  if (requirements.some((r) => r.type === "reject"))
    return { verdict: "deny", scope, requirement: "reject", why: "is refused" };
  if (requirements.every((r) => r.type === "insecureAcceptAnything")) return { verdict: "allow", scope };
  return { verdict: "verify", scope, requirements: requirements.filter((r) => r.type !== "insecureAcceptAnything") };
}

/** The catalog error of a refused image: one line naming the reference, the policy file and the requirement. */
export function trustError(
  ref: ImageReference,
  policy: string,
  scope: string,
  requirement: string,
  why: string,
): JobrtError {
  return jobrtError(
    "ERR_IMAGE_UNTRUSTED",
    {
      problem: `--container-image ${shownText(ref.text)} ${shownText(why)} (policy ${shownText(policy)}, ${shownText(scope)}, requirement ${requirement})`,
    },
    { details: { key: "--container-image", file: policy } },
  );
}

/** A destination the copy never reaches: skopeo checks a digested destination only after the policy accepted the source. */
const PROBE_DEST = `docker://127.0.0.1:1/jobrt-trust-probe@sha256:${"0".repeat(64)}`;
const ACCEPTED = /Digest of source image's manifest would not match destination reference/;

/** How the verification runs: as whoever pulls the image (the job user for a private one), with the pull's flags. */
export interface TrustRun extends Omit<ToolOptions, "timeoutMs"> {
  copyFlags: string[];
}

/**
 * Whether the site's policy accepts `digest` of `ref`; throws ERR_IMAGE_UNTRUSTED when not.
 * Signatures are verified by skopeo itself, through a copy whose destination is a digest the
 * source cannot have: skopeo evaluates the policy on the source (fetching its manifest and
 * signatures, no layer) and only then finds the digest wrong, so that failure means "accepted".
 * Returns what accepted it, for `jobrt check`.
 */
export async function checkTrust(
  ref: ImageReference,
  digest: string,
  settings: ImageSettings,
  run: TrustRun,
): Promise<string> {
  const policy = loadTrustPolicy(settings);
  const d = trustDecision(ref, digest, policy);
  if (d.verdict === "deny") throw trustError(ref, policy.file, d.scope, d.requirement, d.why);
  if (d.verdict === "allow") return `accepted by ${policy.file} (${d.scope}: insecureAcceptAnything)`;
  const types = [...new Set(d.requirements.map((r) => String(r.type)))].join("+");
  const { copyFlags, ...options } = run;
  const source = sourceName(ref, ref.transport === "docker" ? digest : undefined);
  const r = await runTool(
    ["skopeo", ...policyFlags(settings), "copy", "--quiet", "--remove-signatures", ...copyFlags, source, PROBE_DEST],
    { ...options, timeoutMs: settings.pullTimeoutMs },
  );
  if (r.code !== 0 && ACCEPTED.test(r.stderr)) return `accepted by ${policy.file} (${d.scope}: ${types}, verified)`;
  const message = r.code === 0 ? "the verification copy unexpectedly succeeded" : toolMessage(r);
  if (/^Error loading trust policy/.test(message))
    throw jobrtError(
      "ERR_CONF",
      { where: policy.file, problem: `skopeo cannot use the image trust policy (TrustPolicy): ${message}` },
      { details: { file: policy.file, key: "TrustPolicy" } },
    );
  if (!/^Source image rejected|is rejected by policy/.test(message))
    throw imageError(ref, `cannot verify its signatures (${d.scope} of ${policy.file} requires ${types}): ${message}`);
  throw trustError(ref, policy.file, d.scope, types, refusal(message, d.requirements, settings));
}

/** skopeo's reason, in the words of the policy: which key was wanted, where signatures are looked up. */
function refusal(message: string, requirements: PolicyRequirement[], settings: ImageSettings): string {
  const keys = requirements
    .flatMap((r) => [r.keyPath, ...(Array.isArray(r.keyPaths) ? r.keyPaths : [])])
    .filter((k): k is string => typeof k === "string");
  const byKey = keys.length > 0 ? ` by a key in ${keys.join(", ")}` : "";
  if (/A signature was required, but no signature exists/.test(message))
    return `is not signed${byKey}: it has no signature (looked up as ${settings.trustRegistriesDir} says)`;
  if (
    /Invalid GPG signature|not accepted|no public key|unknown key|Signature by key|cryptographic signature verification failed/i.test(
      message,
    )
  )
    return `is not signed${byKey}`;
  if (/is rejected by policy/.test(message)) return "is refused";
  // Debian builds skopeo 1.9 without sigstore: every sigstoreSigned image fails, signed or not.
  if (/sigstore disabled/.test(message))
    return `cannot be verified: this node's skopeo does not verify sigstore signatures (${message.replace(/^Source image rejected: /, "")})`;
  const why = message.replace(/^Source image rejected: /, "");
  return `is refused: ${why}`;
}
