import { JobrtError } from "./errors.js";

/** A runtime name after normalisation. */
export interface RuntimeName {
  /** "oci", "@acme/fast". What jobrt.conf and --runtime use. */
  name: string;
  /** "runtime/oci", "runtime/@acme/fast". What meta.type must say. */
  type: string;
  /** Unscoped part: "oci", "fast". */
  base: string;
  scope?: string;
}

const SEGMENT = "[a-z0-9][a-z0-9._-]*";
const NAME_RE = new RegExp(`^(?:runtime/)?(?:@(${SEGMENT})/)?(${SEGMENT})$`);
/** npm allows 214 characters for a whole package name; ours add a prefix, so stay well below. */
export const MAX_RUNTIME_NAME_LENGTH = 100;

/**
 * Normalises a runtime name from an untrusted source. Accepts `x`, `runtime/x` and `@scope/x`
 * (optionally `runtime/@scope/x`), where x and scope match [a-z0-9][a-z0-9._-]*. Everything else
 * (paths, URLs, `..`, upper case, builtins) is ERR_RUNTIME_NAME. This runs before any import.
 */
export function normalizeRuntimeName(input: string): RuntimeName {
  const shown = JSON.stringify(input.length > 60 ? `${input.slice(0, 60)}...` : input);
  const bad = (why: string): never => {
    throw new JobrtError("ERR_RUNTIME_NAME", `invalid runtime name ${shown}: ${why}`, { details: {} });
  };
  if (typeof input !== "string" || input.length === 0) bad("empty");
  if (input.length > MAX_RUNTIME_NAME_LENGTH) bad(`longer than ${MAX_RUNTIME_NAME_LENGTH} characters`);
  const m = NAME_RE.exec(input);
  if (!m) bad("use a name like 'oci', 'runtime/oci' or '@scope/name' (lower case letters, digits, '.', '_', '-')");
  const [, scope, base] = m as RegExpExecArray;
  if (base === "." || base === ".." || scope === "." || scope === "..") bad("'.' and '..' are not names");
  if (base!.endsWith(".") || (scope ?? "").endsWith(".")) bad("a name cannot end with '.'");
  const name = scope ? `@${scope}/${base}` : (base as string);
  return { name, type: `runtime/${name}`, base: base as string, ...(scope ? { scope } : {}) };
}

/** The npm packages a runtime name may live in, in the fixed order they are tried. */
export function packageCandidates(name: RuntimeName): string[] {
  if (name.scope) return [`@${name.scope}/jobrt-runtime-${name.base}`];
  return [`@jobrt/runtime-${name.base}`, `jobrt-runtime-${name.base}`];
}
