import { pathToFileURL } from "node:url";
import { join } from "node:path";
import { fmt, repoRoot, table } from "./lib.mjs";

export const name = "registry";
export const description =
  "RuntimeRegistry: load of an already-loaded runtime; resolving 1,000 heterogeneous components over 3 runtimes";

export async function run({ quick }) {
  const core = await import(pathToFileURL(join(repoRoot, "packages/core/dist/index.js")).href);
  const cliDir = join(repoRoot, "packages/cli");
  const resolve = core.createPackageResolver({ baseDir: cliDir });
  const rows = [];
  const iterations = quick ? 1_000 : 200_000;

  const registry = new core.RuntimeRegistry({ resolve });
  const t0 = process.hrtime.bigint();
  await registry.load("none");
  const firstLoad = Number(process.hrtime.bigint() - t0) / 1e6;
  rows.push(["first load of runtime/none (resolve + import + init)", "1", fmt(firstLoad * 1000), "-"]);

  // Baseline: what a lookup in a Map costs, the least a name→index registry can do.
  const map = new Map([["runtime/none", 1]]);
  let sink = 0;
  let start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) sink += map.get("runtime/none");
  const mapUs = Number(process.hrtime.bigint() - start) / 1e3 / iterations;
  start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) sink += await registry.load("none");
  const loadUs = Number(process.hrtime.bigint() - start) / 1e3 / iterations;
  rows.push([
    "load of an already-loaded runtime",
    String(iterations),
    fmt(loadUs),
    `${(loadUs / mapUs).toFixed(0)}× a Map.get + await (${fmt(mapUs)} µs)`,
  ]);

  const names = ["none", "oci", "shifter"];
  const components = quick ? 100 : 1_000;
  const fresh = new core.RuntimeRegistry({ resolve });
  start = process.hrtime.bigint();
  const indexes = await Promise.all(Array.from({ length: components }, (_, i) => fresh.load(names[i % 3])));
  const hetUs = Number(process.hrtime.bigint() - start) / 1e3;
  rows.push([
    `${components} heterogeneous components over 3 runtimes (3 first loads included)`,
    String(components),
    fmt(hetUs / components),
    `indexes used: ${[...new Set(indexes)].sort().join(",")}`,
  ]);
  await registry.fini();
  await fresh.fini();
  if (sink < 0) console.log(sink);
  return table(["operation", "calls", "µs per call", "note"], rows);
}
