import { readFileSync } from "node:fs";
import { type ExecSpec, type RuntimePlugin, isExecSpec } from "@jobrt/core";
import type { RunResult } from "./suitekit.js";

/*
 * A plugin's peer range on @jobrt/core says the oldest core it works with; a core minor adds API
 * that an older 2.x ignores without a word (an ExecSpec's `supervise`: no SIGTERM handling through
 * bwrap, exit 1 for a missing command). A plugin that uses an addition but keeps `^2.0.0` installs
 * against 2.0.0 without a peer warning and then misbehaves (issue 40, item 1). The testkit says so.
 */

/** What the suite saw of a plugin: the plugin and the ExecSpecs its baseline step returned. */
export interface PluginUse {
  plugin: RuntimePlugin;
  specs: ExecSpec[];
}

/** The core API additions since 2.0.0 a plugin can be seen to use (docs/writing-a-runtime.md, "5. Publish"). */
const ADDITIONS: { what: string; since: string; uses: (u: PluginUse) => boolean }[] = [
  { what: "ExecSpec.supervise", since: "2.1.0", uses: (u) => u.specs.some((s) => s.supervise !== undefined) },
  { what: "the describe hook", since: "2.1.0", uses: (u) => typeof u.plugin.describe === "function" },
  { what: "the tools hook", since: "2.1.0", uses: (u) => typeof u.plugin.tools === "function" },
  { what: "the check hook", since: "2.1.0", uses: (u) => typeof u.plugin.check === "function" },
  { what: 'the "pmi-fd" capability', since: "2.1.0", uses: (u) => hasCapability(u, "pmi-fd") },
  // A 2.0.0 host neither passes the fds at 3 nor sets TaskRecord.passedFds.
  { what: 'the "pass-fds" capability', since: "2.1.0", uses: (u) => hasCapability(u, "pass-fds") },
  { what: 'meta.accepts "devices"', since: "2.1.0", uses: (u) => u.plugin.meta.accepts.includes("devices") },
];

const hasCapability = (u: PluginUse, c: string) => (u.plugin.meta.capabilities ?? []).includes(c);

const parse = (v: string) => v.split(".").map(Number) as [number, number, number];

function older(a: string, b: string): boolean {
  const [x, y] = [parse(a), parse(b)];
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return (x[i] as number) < (y[i] as number);
  return false;
}

/** The oldest version a range admits, as far as its written versions say (`^2.0.0 || ^3.0.0`: 2.0.0). */
export function rangeMinimum(range: string): string | undefined {
  const versions = [...range.matchAll(/(\d+)\.(\d+)\.(\d+)/g)].map((m) => m.slice(1, 4).join("."));
  return versions.reduce<string | undefined>((min, v) => (min === undefined || older(v, min) ? v : min), undefined);
}

/** One note per addition the plugin uses that its peer range's minimum core does not have. */
export function peerMinimumNotes(range: string, use: PluginUse): string[] {
  const minimum = rangeMinimum(range);
  if (minimum === undefined) return [];
  return ADDITIONS.filter((a) => a.uses(use) && older(minimum, a.since)).map(
    (a) =>
      `it uses ${a.what}, added in @jobrt/core ${a.since}, but its peer range "${range}" admits ${minimum}, which ignores it: raise peerDependencies "@jobrt/core" to "^${a.since}"`,
  );
}

/** The peer range on @jobrt/core in the plugin's package.json, if it has one. */
export function corePeerRange(packageJson: string): string | undefined {
  try {
    const manifest = JSON.parse(readFileSync(packageJson, "utf8")) as { peerDependencies?: Record<string, unknown> };
    const range = manifest.peerDependencies?.["@jobrt/core"];
    return typeof range === "string" ? range : undefined;
  } catch {
    return undefined;
  }
}

export const execSpecsOf = (results: RunResult[]): ExecSpec[] => results.filter((r): r is ExecSpec => isExecSpec(r));
