import { jobrtError } from "./errors.js";

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
/**
 * The longest name (`x` or `@scope/x`, not counting an optional `runtime/` prefix, so every
 * spelling of one name is accepted alike). npm allows 214 characters for a whole package name;
 * ours add `jobrt-runtime-`, so stay well below.
 */
export const MAX_RUNTIME_NAME_LENGTH = 100;
const TYPE_PREFIX = "runtime/";

/**
 * Normalises a runtime name from an untrusted source. Accepts `x`, `runtime/x` and `@scope/x`
 * (optionally `runtime/@scope/x`), where x and scope match [a-z0-9][a-z0-9._-]* and the name
 * without `runtime/` has at most MAX_RUNTIME_NAME_LENGTH characters. Everything else
 * (paths, URLs, `..`, upper case, builtins) is ERR_RUNTIME_NAME. This runs before any import.
 */
export function normalizeRuntimeName(input: string): RuntimeName {
  const shown = JSON.stringify(input.length > 60 ? `${input.slice(0, 60)}...` : input);
  const bad = (why: string): never => {
    throw jobrtError("ERR_RUNTIME_NAME", { name: shown, problem: why }, { details: {} });
  };
  if (typeof input !== "string" || input.length === 0) bad("empty");
  const bare = input.startsWith(TYPE_PREFIX) ? input.slice(TYPE_PREFIX.length) : input;
  if (bare.length > MAX_RUNTIME_NAME_LENGTH)
    bad(`longer than ${MAX_RUNTIME_NAME_LENGTH} characters${bare === input ? "" : ` after "${TYPE_PREFIX}"`}`);
  const m = NAME_RE.exec(input);
  if (!m) bad("use a name like 'oci', 'runtime/oci' or '@scope/name' (lower case letters, digits, '.', '_', '-')");
  const [, scope, base] = m as RegExpExecArray;
  if (base === "." || base === ".." || scope === "." || scope === "..") bad("'.' and '..' are not names");
  if (base!.endsWith(".") || (scope ?? "").endsWith(".")) bad("a name cannot end with '.'");
  const name = scope ? `@${scope}/${base}` : (base as string);
  return { name, type: `runtime/${name}`, base: base as string, ...(scope ? { scope } : {}) };
}

/**
 * The name a runtime type (`meta.type`, `RuntimeName.type`) stands for: `runtime/@acme/fast` is
 * `@acme/fast`, what jobrt.conf, --runtime and messages use. The inverse of `.type`; a text
 * without the prefix is given back as it is (the node log shows what a journal holds). Since core 2.1.0.
 */
export function runtimeNameOf(type: string): string {
  return type.startsWith(TYPE_PREFIX) ? type.slice(TYPE_PREFIX.length) : type;
}

/** Whether `type` is a runtime type: `runtime/` and a name normalizeRuntimeName keeps as it is. */
export function isRuntimeType(type: string): boolean {
  if (!type.startsWith(TYPE_PREFIX)) return false;
  try {
    return normalizeRuntimeName(type).type === type;
  } catch {
    return false;
  }
}

/** The npm packages a runtime name may live in, in the fixed order they are tried. */
export function packageCandidates(name: RuntimeName): string[] {
  if (name.scope) return [`@${name.scope}/jobrt-runtime-${name.base}`];
  return [`@jobrt/runtime-${name.base}`, `jobrt-runtime-${name.base}`];
}
