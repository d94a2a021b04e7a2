import Module, { createRequire } from "node:module";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { nodeModulesPaths } from "../src/nodemodulespaths.js";

// Node's own answer: what require would search from a module in `dir`, without NODE_PATH and the
// $HOME/.node_modules style global folders it appends (jobrt never resolves a runtime from those).
function nodesAnswer(dir: string): string[] {
  const global = (Module as unknown as { globalPaths: string[] }).globalPaths;
  expect(global.length).toBeGreaterThan(0);
  const all = createRequire(join(dir, "noop.js")).resolve.paths("x") ?? [];
  expect(all.slice(-global.length)).toEqual(global);
  return all.slice(0, -global.length);
}

describe("nodeModulesPaths", () => {
  it.each([
    "/",
    "/usr",
    "/opt/site/lib",
    "/opt/site/node_modules",
    "/opt/site/node_modules/@jobrt/cli",
    "/opt/node_modules/node_modules/x",
    "/opt/site/node_modules_old/x",
    "/opt/site/my-node_modules/x",
    "/opt//site/./lib/../dist/",
    "/node_modules",
  ])("gives Node's lookup path from %s", (dir) => {
    expect(nodeModulesPaths(dir)).toEqual(nodesAnswer(dir));
  });

  it("lists every ancestor nearest first and skips node_modules/node_modules", () => {
    expect(nodeModulesPaths("/a/node_modules/b")).toEqual([
      "/a/node_modules/b/node_modules",
      "/a/node_modules",
      "/node_modules",
    ]);
  });
});
