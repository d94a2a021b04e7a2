import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntimeProject } from "../src/index.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

/** The generated package needs the core of the starter's own release (all jobrt packages share one version). */
const starterRange = `^${(JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version.split(".")[0]}.0.0`;

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");
const bin = join(here, "../dist/bin.js");
let tmp: string;
beforeAll(() => {
  tmp = tempDir("jobrt-create-");
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Links the dependencies a generated package would get from npm to this workspace's builds. */
function linkDeps(dir: string): void {
  const req = createRequire(join(repo, "package.json"));
  const links: [string, string][] = [
    ["@jobrt/core", join(repo, "packages/core")],
    ["@jobrt/testkit", join(repo, "packages/testkit")],
    ["vitest", dirname(req.resolve("vitest/package.json"))],
    ["typescript", dirname(req.resolve("typescript/package.json"))],
    ["@types/node", dirname(req.resolve("@types/node/package.json"))],
  ];
  for (const [name, target] of links) {
    mkdirSync(dirname(join(dir, "node_modules", name)), { recursive: true });
    symlinkSync(target, join(dir, "node_modules", name));
  }
}

/** Runs the starter's bin for `name` in the temp dir, links its dependencies and builds it. */
function createAndBuild(name: string): string {
  const r = spawnSync(process.execPath, [bin, join(tmp, name)], { encoding: "utf8" });
  expect(r.status, r.stderr).toBe(0);
  const dir = join(tmp, name);
  linkDeps(dir);
  const tsc = spawnSync(process.execPath, [join(dir, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], { cwd: dir, encoding: "utf8" });
  expect(tsc.status, tsc.stdout + tsc.stderr).toBe(0);
  return dir;
}

describe("create-jobrt-runtime", () => {
  it("writes a package named after the runtime, with every placeholder filled", () => {
    const created = createRuntimeProject({ dir: join(tmp, "jobrt-runtime-fast") });
    expect(created).toMatchObject({ name: "fast", packageName: "jobrt-runtime-fast" });
    expect(created.files).toEqual([".gitignore", "LICENSE", "README.md", "package.json", "src/index.ts", "test/conformance.test.ts", "tsconfig.json", "vitest.config.ts"]);
    for (const f of created.files) expect(readFileSync(join(created.dir, f), "utf8"), f).not.toMatch(/__[A-Z_]+__/);
    const pkg = JSON.parse(readFileSync(join(created.dir, "package.json"), "utf8"));
    expect(pkg).toMatchObject({ name: "jobrt-runtime-fast", version: "1.0.0", keywords: expect.arrayContaining(["jobrt-runtime"]), peerDependencies: { "@jobrt/core": starterRange }, sideEffects: false });
    expect(Object.keys(pkg.exports["."])).toEqual(["types", "default"]);
    expect(readFileSync(join(created.dir, "src/index.ts"), "utf8")).toContain('type: "runtime/fast"');
  });

  it("scoped names map to @scope/jobrt-runtime-x", () => {
    const created = createRuntimeProject({ dir: join(tmp, "acme"), name: "@acme/gpu" });
    expect(created).toMatchObject({ name: "@acme/gpu", packageName: "@acme/jobrt-runtime-gpu" });
    expect(readFileSync(join(created.dir, "src/index.ts"), "utf8")).toContain('type: "runtime/@acme/gpu"');
  });

  it("suggests a scoped name for an unscoped one (a dependency-confusion target), and says nothing for a scoped one", () => {
    const plain = spawnSync(process.execPath, [bin, join(tmp, "jobrt-runtime-plain")], { encoding: "utf8" });
    expect(plain.status).toBe(0);
    expect(plain.stderr).toBe(
      "create-jobrt-runtime: note: jobrt-runtime-plain is unscoped; a site installing it from its own registry gets it from the public one, where anyone may publish that name: prefer a scoped name, --name @your-org/plain\n",
    );
    const scoped = spawnSync(process.execPath, [bin, join(tmp, "scoped"), "--name", "@acme/plain"], { encoding: "utf8" });
    expect(scoped.status).toBe(0);
    expect(scoped.stderr).toBe("");
  });

  it.each([
    [["x", "--name", "Fast"], /--name "Fast": use a name like/],
    [["x", "--name", "runtime/fast"], /give the name without "runtime\/"/],
    [["x", "--name", "../etc"], /--name "\.\.\/etc"/],
    [[], /give exactly one directory/],
    [["x", "--bogus"], /Unknown option '--bogus'/],
  ])("refuses %j with exit 2 and one clear line", (args, message) => {
    const r = spawnSync(process.execPath, [bin, ...args.map((a) => (a === "x" ? join(tmp, "refused") : a))], { encoding: "utf8" });
    expect(r.status).toBe(2);
    expect(r.stderr.split("\n")[0]).toMatch(/^create-jobrt-runtime: /);
    expect(r.stderr).toMatch(message);
  });

  it("refuses a non-empty directory", () => {
    const dir = join(tmp, "busy");
    mkdirSync(dir);
    writeFileSync(join(dir, "keep"), "");
    const r = spawnSync(process.execPath, [bin, dir], { encoding: "utf8" });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("exists and is not empty");
  });

  it("what it would publish is complete: a LICENSE, no placeholder links, source maps that resolve to shipped files", () => {
    const dir = createAndBuild("jobrt-runtime-shipped");
    const pack = spawnSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: dir, encoding: "utf8" });
    expect(pack.status, pack.stderr).toBe(0);
    const shipped = new Set((JSON.parse(pack.stdout) as { files: { path: string }[] }[])[0]?.files.map((f) => f.path));
    expect(shipped.has("LICENSE")).toBe(true);
    expect(readFileSync(join(dir, "LICENSE"), "utf8")).toContain("Apache License");
    const maps = [...shipped].filter((f) => f.endsWith(".map"));
    expect(maps.length).toBeGreaterThan(0);
    for (const map of maps) {
      const { sources } = JSON.parse(readFileSync(join(dir, map), "utf8")) as { sources: string[] };
      for (const source of sources) expect(shipped.has(join(dirname(map), source)), `${map} -> ${source}`).toBe(true);
    }
    for (const f of shipped) {
      if (/\.(md|json|ts|js)$/.test(f)) expect(readFileSync(join(dir, f), "utf8"), f).not.toMatch(/example\.invalid|your-(org|name)|TODO/i);
    }
  });

  it("the generated package builds and passes the testkit out of the box", async () => {
    const dir = createAndBuild("jobrt-runtime-starter");
    const plugin = (await import(pathToFileURL(join(dir, "dist/index.js")).href)).default;
    expect(plugin.meta).toMatchObject({ name: "starter", type: "runtime/starter", version: "1.0.0", apiVersion: 2, accepts: [] });
    // API 2: per-step state is what setup returns, never a module-level map.
    expect(readFileSync(join(dir, "src/index.ts"), "utf8")).not.toMatch(/WeakMap|new Map/);
    const report = join(tmp, "starter-report.json");
    const test = spawnSync(process.execPath, [join(dir, "node_modules/vitest/vitest.mjs"), "run", "--reporter=json", `--outputFile=${report}`], {
      cwd: dir,
      encoding: "utf8",
      timeout: 120_000,
    });
    expect(test.status, test.stdout + test.stderr).toBe(0);
    const results = (JSON.parse(readFileSync(report, "utf8")) as { testResults: { assertionResults: { title: string; status: string }[] }[] }).testResults.flatMap(
      (f) => f.assertionResults,
    );
    const passed = results.filter((t) => t.status === "passed").map((t) => t.title);
    expect(passed.length).toBeGreaterThan(15);
    for (const check of ["meta.shape", "state.concurrent-steps", "launch.tasks", "errors.invalid"]) {
      expect(passed.some((t) => t.includes(`] ${check}`)), check).toBe(true);
    }
  });
});
