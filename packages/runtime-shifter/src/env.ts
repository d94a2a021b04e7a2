import { globToRegExp } from "./image.js";
import { reject, show } from "./reject.js";

/** Linux refuses a single argv or env string longer than this (MAX_ARG_STRLEN, NUL included). */
export const MAX_ARG_STRLEN = 128 * 1024;
export const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Always removed from the task env before shifter sees it: shifter reads these to choose the
 * image, volumes and modules whenever the matching option is absent, so an inherited value would
 * silently change what runs.
 */
export const BUILTIN_STRIP_ENV = [
  "SHIFTER_*",
  "SLURM_SPANK_SHIFTER_*",
  "_SLURM_SPANK_OPTION_shifter_*",
  "SPANK_SHIFTER_*",
];

/** Validates `--container-env NAME=VALUE` entries; returns them unchanged, in order. */
export function parseEnvEntries(entries: string[], field: string): string[] {
  const seen = new Set<string>();
  for (const entry of entries) {
    const eq = entry.indexOf("=");
    if (eq < 0) throw reject(field, entry, "must be NAME=VALUE");
    const name = entry.slice(0, eq);
    const value = entry.slice(eq + 1);
    if (!ENV_NAME_RE.test(name))
      throw reject(field, entry, `the name ${show(name)} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)`);
    if (value === "") throw reject(field, entry, "has an empty value, which shifter refuses (fatal for --env)");
    if (entry.includes("\0")) throw reject(field, entry, "contains a NUL byte");
    if (`--env=${entry}`.length >= MAX_ARG_STRLEN)
      throw reject(field, entry, `is longer than the kernel's ${MAX_ARG_STRLEN}-byte argument limit`);
    if (seen.has(name)) throw reject(field, entry, `sets ${name} twice`);
    seen.add(name);
  }
  return [...entries];
}

/** The task env with every stripped name removed. */
export function stripEnv(env: Record<string, string>, extra: string[]): Record<string, string> {
  const patterns = [...BUILTIN_STRIP_ENV, ...extra].map(globToRegExp);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (!patterns.some((re) => re.test(k))) out[k] = v;
  return out;
}
