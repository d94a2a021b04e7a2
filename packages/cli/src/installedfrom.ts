import { readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/**
 * Where npm fetched a runtime package from: the `resolved` URL its lockfile records (the hidden one,
 * `node_modules/.package-lock.json`, or the install root's `package-lock.json`). Read only by
 * `jobrt runtimes`, not on each load. Undefined when npm did not install it there (pnpm, a copy),
 * or the package is not where npm puts it (`<root>/node_modules/<package>`).
 */
export function installedFrom(packageDir: string, packageName: string): string | undefined {
  const depth = packageName.startsWith("@") ? 2 : 1;
  let nodeModules = packageDir;
  for (let i = 0; i < depth; i++) nodeModules = dirname(nodeModules);
  if (basename(nodeModules) !== "node_modules" || join(nodeModules, packageName) !== packageDir) return undefined;
  for (const lock of [join(nodeModules, ".package-lock.json"), join(dirname(nodeModules), "package-lock.json")]) {
    try {
      const { packages } = JSON.parse(readFileSync(lock, "utf8")) as {
        packages?: Record<string, { resolved?: unknown }>;
      };
      const resolved = packages?.[`node_modules/${packageName}`]?.resolved;
      if (typeof resolved === "string") return resolved;
    } catch {
      // No such lockfile, or one npm did not write: nothing to say.
    }
  }
  return undefined;
}
