import type { PluginOrigin } from "./plugin.js";

const RESOLVED = Symbol.for("jobrt.runtime.resolved");

export interface ResolvedRuntime {
  readonly [RESOLVED]: true;
  readonly plugin: unknown;
  readonly origin: PluginOrigin;
}

/** Wraps a resolved default export with where it came from, so errors and listings can name it. */
export function resolvedRuntime(plugin: unknown, origin: PluginOrigin): ResolvedRuntime {
  return { [RESOLVED]: true, plugin, origin };
}

export function isResolvedRuntime(value: unknown): value is ResolvedRuntime {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[RESOLVED] === true;
}
