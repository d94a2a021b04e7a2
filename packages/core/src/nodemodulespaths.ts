import { basename, dirname, join, resolve } from "node:path";

/**
 * The node_modules directories Node looks in for a package imported from a module in `dir`, nearest
 * first: `<ancestor>/node_modules` for `dir` and every ancestor up to `/`, skipping a directory that
 * is itself called node_modules (no `node_modules/node_modules`), as Node's own resolution does
 * (test/nodemodulespaths.test.ts compares the two). Unlike `createRequire(...).resolve.paths()` it
 * leaves out NODE_PATH and the `$HOME/.node_modules` style global folders: those come from the
 * caller's environment, and a runtime resolves only from above the site install (docs/decisions.md,
 * "Runtimes resolve from the site install root"). Computed here rather than with `node:module`,
 * which loads that builtin and its source-map support at every jobrt start.
 */
export function nodeModulesPaths(dir: string): string[] {
  const paths: string[] = [];
  for (let current = resolve(dir); ; current = dirname(current)) {
    if (basename(current) !== "node_modules") paths.push(join(current, "node_modules"));
    if (dirname(current) === current) return paths;
  }
}
