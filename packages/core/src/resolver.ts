import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";
import { jobrtError, messageOf } from "./errors.js";
import { type RuntimeName, normalizeRuntimeName, packageCandidates } from "./names.js";
import { nodeModulesPaths } from "./nodemodulespaths.js";
import type { PluginOrigin } from "./plugin.js";
import type { Logger } from "./types.js";

/*
 * Resolution, in one place: from a runtime name to a plugin module. The name is normalised once,
 * where it enters (jobrt.conf, or the registry's `load`); from there on it travels as a RuntimeName
 * and nothing normalises it again (docs/decisions.md, "One resolution module").
 */

/** The runtime a step gets when neither it nor jobrt.conf's DefRuntimePlugin names one. Since core 2.1.0. */
export const DEFAULT_RUNTIME = "oci";

/** The first-party runtimes a site may load when its jobrt.conf says nothing. */
export const DEFAULT_ALLOWED_RUNTIMES = ["none", DEFAULT_RUNTIME, "shifter"] as const;

/**
 * What a RuntimeNameResolver found: the module's default export (checked by the registry after)
 * and where it came from. Since @jobrt/core 2.1.0.
 */
export interface ResolvedRuntime {
  plugin: unknown;
  origin?: PluginOrigin;
}

/**
 * A RuntimeRegistry's `resolve` as @jobrt/core 2.0.0 defined it, and still takes: given a full
 * runtime type ("runtime/oci"), resolves to the plugin module's default export.
 */
export type RuntimeResolver = (type: string) => Promise<unknown>;

/**
 * A RuntimeRegistry's `resolveRuntime`: given the normalised name, resolves to the plugin and
 * where it came from. Since @jobrt/core 2.1.0 (`resolve` keeps the 2.0.0 contract above).
 */
export type RuntimeNameResolver = (name: RuntimeName) => Promise<ResolvedRuntime>;

/**
 * createPackageResolver's by-name form, kept on the 2.0.0-shaped function it returns: the registry
 * uses it, so `resolve: createPackageResolver(...)` still reports each plugin's package and the
 * name is normalised once (docs/decisions.md, "One resolution module").
 */
const BY_NAME = Symbol("jobrt.packageResolver.byName");

type TaggedResolver = RuntimeResolver & { [BY_NAME]?: RuntimeNameResolver };

/** The by-name form the registry calls, from whichever of its two options was given (exactly one). */
export function registryResolver(
  options: { resolve?: RuntimeResolver; resolveRuntime?: RuntimeNameResolver } | undefined,
): RuntimeNameResolver {
  const { resolve, resolveRuntime } = options ?? {};
  if (resolve !== undefined && resolveRuntime !== undefined) {
    throw jobrtError("ERR_RUNTIME_CONTRACT", {
      problem: "RuntimeRegistry takes resolve(type) or resolveRuntime(name), not both",
    });
  }
  if (typeof resolveRuntime === "function") return resolveRuntime;
  if (typeof resolve !== "function") {
    throw jobrtError("ERR_RUNTIME_CONTRACT", {
      problem: "RuntimeRegistry needs a resolve(type) or resolveRuntime(name) function",
    });
  }
  const byName = (resolve as TaggedResolver)[BY_NAME];
  if (byName) return byName;
  return async (name) => ({ plugin: await resolve(name.type) });
}

export interface PackageResolverOptions {
  /** Directory packages are resolved from (the site install root or PluginDir), never the job's cwd. */
  baseDir: string;
  /** RuntimePlugins= allowlist (`x` or `runtime/x`), normalised once here. Default: the first-party three. */
  allow?: readonly string[];
  log?: Logger;
}

export interface LocatedPackage {
  package: string;
  version: string;
  /** Directory of the package. */
  dir: string;
  /** Entry file that will be imported. */
  entry: string;
}

/**
 * Finds the package a runtime name maps to, without importing it. `x` → `@jobrt/runtime-x` or
 * `jobrt-runtime-x` (both installed is ERR_RUNTIME_AMBIGUOUS); `@scope/x` → `@scope/jobrt-runtime-x`.
 */
export function locateRuntimePackage(name: RuntimeName, baseDir: string): LocatedPackage {
  const lookup = nodeModulesPaths(baseDir);
  const found: LocatedPackage[] = [];
  const candidates = packageCandidates(name);
  for (const pkg of candidates) {
    // The first node_modules dir on the lookup path that has the package wins, as in Node.
    const manifestPath = lookup.map((dir) => join(dir, pkg, "package.json")).find((p) => existsSync(p));
    if (!manifestPath) continue;
    const dir = realpathSync(dirname(manifestPath));
    let manifest: PackageManifest;
    try {
      manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as PackageManifest;
    } catch (error) {
      throw jobrtError(
        "ERR_RUNTIME_INVALID",
        { runtime: name.type, origin: "", problem: `cannot read ${manifestPath}: ${messageOf(error)}` },
        {
          details: { runtime: name.type, package: pkg, path: dir },
        },
      );
    }
    const version = typeof manifest.version === "string" ? manifest.version : "unknown";
    const entry = entryFile(manifest, dir);
    if (!entry) {
      throw jobrtError(
        "ERR_RUNTIME_INVALID",
        {
          runtime: name.type,
          origin: ` from package ${pkg}@${version} (${dir})`,
          problem: `it has no importable entry point (its "exports" or "main" names no file inside the package)`,
        },
        { details: { runtime: name.type, package: pkg, path: dir, version } },
      );
    }
    found.push({ package: pkg, version, dir, entry });
  }
  if (found.length === 0) {
    throw jobrtError(
      "ERR_RUNTIME_NOT_FOUND",
      {
        runtime: name.name,
        problem: `is not installed: none of ${candidates.join(", ")} can be resolved from ${baseDir}; install one next to @jobrt/cli (or in PluginDir)`,
      },
      { details: { runtime: name.type, path: baseDir } },
    );
  }
  if (found.length > 1) {
    throw jobrtError(
      "ERR_RUNTIME_AMBIGUOUS",
      { runtime: name.name, packages: found.map((f) => `${f.package}@${f.version}`).join(" and ") },
      { details: { runtime: name.type, path: baseDir } },
    );
  }
  return found[0] as LocatedPackage;
}

interface PackageManifest {
  version?: unknown;
  main?: unknown;
  exports?: unknown;
}

const CONDITIONS = ["import", "node", "default"];

/** The "." target of an exports field for an ESM import on Node. */
function exportTarget(exports: unknown): string | undefined {
  if (typeof exports === "string") return exports;
  if (Array.isArray(exports)) {
    for (const item of exports) {
      const t = exportTarget(item);
      if (t) return t;
    }
    return undefined;
  }
  if (typeof exports !== "object" || exports === null) return undefined;
  const map = exports as Record<string, unknown>;
  if (Object.keys(map).some((k) => k.startsWith("."))) return exportTarget(map["."]);
  for (const [condition, target] of Object.entries(map)) {
    if (CONDITIONS.includes(condition)) {
      const t = exportTarget(target);
      if (t) return t;
    }
  }
  return undefined;
}

/** The package's main module as Node would import it, if it is a file inside the package. */
function entryFile(manifest: PackageManifest, dir: string): string | undefined {
  const target =
    manifest.exports !== undefined
      ? exportTarget(manifest.exports)
      : typeof manifest.main === "string"
        ? manifest.main
        : "index.js";
  if (!target) return undefined;
  const candidates = manifest.exports !== undefined ? [target] : [target, `${target}.js`, join(target, "index.js")];
  for (const c of candidates) {
    const path = resolve(dir, c);
    if (!existsSync(path) || !statSync(path).isFile()) continue;
    const real = realpathSync(path);
    if (real === dir || !real.startsWith(`${dir}${sep}`)) return undefined;
    return real;
  }
  return undefined;
}

/** The allowlist as a set of normalised names; an entry that is no runtime name allows nothing. */
function allowedNames(allow: readonly string[]): Set<string> {
  return new Set(
    allow.flatMap((a) => {
      try {
        return [normalizeRuntimeName(a).name];
      } catch {
        return [];
      }
    }),
  );
}

/**
 * The default resolver for RuntimeRegistry: allowlist, fixed name → package rule, resolution from
 * `baseDir`, then `import()` of the package entry. The registry checks the plugin's shape after.
 */
export function createPackageResolver(options: PackageResolverOptions): RuntimeResolver {
  const byName = packageResolverByName(options);
  const resolve: TaggedResolver = async (type: string) => (await byName(normalizeRuntimeName(type))).plugin;
  resolve[BY_NAME] = byName;
  return resolve;
}

function packageResolverByName(options: PackageResolverOptions): RuntimeNameResolver {
  const allowed = allowedNames(options.allow ?? DEFAULT_ALLOWED_RUNTIMES);
  return async (name: RuntimeName) => {
    if (!allowed.has(name.name)) {
      throw jobrtError(
        "ERR_RUNTIME_NOT_ALLOWED",
        { runtime: name.name, allowed: [...allowed].join(",") },
        { details: { runtime: name.type } },
      );
    }
    const located = locateRuntimePackage(name, options.baseDir);
    options.log?.("verbose", `runtime ${name.type}: ${located.package}@${located.version} from ${located.entry}`);
    let mod: { default?: unknown };
    try {
      mod = (await import(pathToFileURL(located.entry).href)) as { default?: unknown };
    } catch (error) {
      throw jobrtError(
        "ERR_RUNTIME_INVALID",
        {
          runtime: name.type,
          origin: ` from package ${located.package}@${located.version} (${located.dir})`,
          problem: `importing ${located.entry} failed: ${messageOf(error)}`,
        },
        {
          cause: error,
          details: { runtime: name.type, package: located.package, version: located.version, path: located.dir },
        },
      );
    }
    return { plugin: mod.default, origin: { package: located.package, version: located.version, path: located.dir } };
  };
}
