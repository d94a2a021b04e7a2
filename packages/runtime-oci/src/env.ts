import type { CreateEnvFileMode } from "./conf.js";

/** `NAME=value` strings of an environment, in insertion order. */
export function envStrings(env: Record<string, string>): string[] {
  return Object.entries(env).map(([k, v]) => `${k}=${v}`);
}

/** Removes every `NAME=value` string the (unanchored) exclusion regex matches. */
export function filterEnvStrings(entries: readonly string[], exclude: RegExp | undefined): string[] {
  if (!exclude) return [...entries];
  const re = new RegExp(exclude.source, exclude.flags.replace(/[gy]/g, ""));
  return entries.filter((e) => !re.test(e));
}

/** The same filter over a record (what runtime commands inherit). */
export function filterEnvRecord(env: Record<string, string>, exclude: RegExp | undefined): Record<string, string> {
  if (!exclude) return { ...env };
  const re = new RegExp(exclude.source, exclude.flags.replace(/[gy]/g, ""));
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (!re.test(`${k}=${v}`)) out[k] = v;
  return out;
}

/**
 * Merges the bundle's `process.env` into the job env the way Slurm does (runtime-oci.md, Lifecycle): a bundle
 * value replaces a job variable of the same name; entries without `=` become `NAME=(null)`.
 */
export function mergeBundleEnv(job: readonly string[], bundle: readonly string[]): string[] {
  const out = new Map<string, string>();
  for (const e of job) {
    const i = e.indexOf("=");
    out.set(i < 0 ? e : e.slice(0, i), e);
  }
  for (const e of bundle) {
    const i = e.indexOf("=");
    const name = i < 0 ? e : e.slice(0, i);
    out.set(name, i < 0 ? `${e}=(null)` : e);
  }
  return [...out.values()];
}

export interface EnvFile {
  content: string;
  /** Variables left out (newline mode cannot hold a value with a line feed). */
  dropped: string[];
}

/** The CreateEnvFile contents: every entry NUL-terminated, or LF-terminated in newline mode. */
export function formatEnvFile(entries: readonly string[], mode: Exclude<CreateEnvFileMode, "disabled">): EnvFile {
  if (mode === "null") return { content: entries.map((e) => `${e}\0`).join(""), dropped: [] };
  const dropped: string[] = [];
  let content = "";
  for (const e of entries) {
    if (e.includes("\n")) dropped.push(e.slice(0, Math.max(0, e.indexOf("="))));
    else content += `${e}\n`;
  }
  return { content, dropped };
}
