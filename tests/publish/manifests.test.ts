import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../helpers/jobrt.js";

const rootEngines = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { engines: { node: string } })
  .engines.node;

// Packaging gate (docs/decisions.md, "Every package states how it is consumed"): every
// publishable workspace package states how it is consumed (ESM, exports types-first, files, engines, sideEffects), who may use it (license, repository),
// how it is found (keywords; `jobrt-runtime` for runtimes) and which core it needs (an explicit
// peer range). publint and attw check the packed tarballs (`turbo run lint:pkg`); this checks policy.

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  description?: string;
  type?: string;
  license?: string;
  repository?: { type?: string; url?: string; directory?: string };
  keywords?: string[];
  exports?: Record<string, unknown>;
  main?: string;
  types?: string;
  files?: string[];
  engines?: { node?: string };
  sideEffects?: boolean | string[];
  bin?: Record<string, string>;
  publishConfig?: { access?: string };
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

function workspaceGlobs(): string[] {
  const text = readFileSync(join(repoRoot, "pnpm-workspace.yaml"), "utf8");
  return [...text.matchAll(/^\s*-\s*["']?([^"'\n*]+?)\/\*["']?\s*$/gm)].map((m) => m[1] as string);
}

const packages: [string, Manifest][] = [];
for (const group of ["packages", "examples"]) {
  for (const entry of existsSync(join(repoRoot, group)) ? readdirSync(join(repoRoot, group)) : []) {
    const file = join(repoRoot, group, entry, "package.json");
    if (existsSync(file)) packages.push([`${group}/${entry}`, JSON.parse(readFileSync(file, "utf8")) as Manifest]);
  }
}
const publishable = packages.filter(([, m]) => !m.private);
const isRuntime = (name: string) => /^(@jobrt\/runtime-|(@[^/]+\/)?jobrt-runtime-)/.test(name);
/** An explicit semver range: `^1.0.0`, or `workspace:^1.0.0` (published as `^1.0.0`), never `workspace:*` or a bare `workspace:^`. */
const EXPLICIT_RANGE = /^(workspace:)?\^\d+\.\d+\.\d+$/;

describe("package manifests", () => {
  it("every package and example directory is a pnpm workspace member", () => {
    expect(workspaceGlobs()).toEqual(expect.arrayContaining(["packages", "examples"]));
    expect(publishable.map(([dir]) => dir)).toEqual(
      expect.arrayContaining(["packages/core", "examples/jobrt-runtime-charliecloud", "examples/create-jobrt-runtime"]),
    );
    // The conformance cases below run for these: the filter must not lose one.
    expect(publishable.filter(([, m]) => isRuntime(m.name)).map(([dir]) => dir)).toEqual(
      expect.arrayContaining([
        "packages/runtime-none",
        "packages/runtime-oci",
        "packages/runtime-shifter",
        "examples/jobrt-runtime-charliecloud",
      ]),
    );
  });

  describe.each(publishable)("%s", (dir, m) => {
    it("is ESM with exports (types first, default last, ./package.json), main and types matching", () => {
      expect(m.type).toBe("module");
      const root = m.exports?.["."] as Record<string, string>;
      expect(Object.keys(root)).toEqual(["types", "default"]);
      expect(m.exports?.["./package.json"]).toBe("./package.json");
      expect(m.main).toBe(root.default);
      expect(m.types).toBe(root.types);
    });

    it("ships only dist (no tsbuildinfo), states engines, sideEffects and public access", () => {
      expect(m.files?.[0]).toBe("dist");
      expect(m.files).toContain("!dist/**/*.tsbuildinfo");
      // The lines CI tests (scripts/test.sh on 20, scripts/node-lines.sh on 22 and 24), as the root says.
      expect(m.engines?.node).toBe(rootEngines);
      // Only a package with a command may have side effects on import (its bin runs on load).
      expect(
        m.sideEffects === false || (m.bin !== undefined && m.sideEffects === true),
        `sideEffects is ${JSON.stringify(m.sideEffects)}`,
      ).toBe(true);
      expect(m.publishConfig?.access).toBe("public");
    });

    it("has a semver version from 1.0.0 up, description, license, repository with its directory, README and CHANGELOG", () => {
      // 0.x would make every core minor out of ^0.y range: changesets would bump plugins to a major.
      expect(m.version).toMatch(/^[1-9]\d*\.\d+\.\d+$/);
      expect(m.description?.length).toBeGreaterThan(10);
      expect(m.license).toBeTruthy();
      expect(m.repository).toMatchObject({ type: "git", directory: dir });
      expect(m.repository?.url).toMatch(/^git\+https:\/\//);
      expect(existsSync(join(repoRoot, dir, "README.md"))).toBe(true);
      expect(existsSync(join(repoRoot, dir, "CHANGELOG.md"))).toBe(true);
    });

    it("keywords include jobrt, and jobrt-runtime exactly for runtime packages", () => {
      expect(m.keywords).toContain("jobrt");
      expect(m.keywords?.includes("jobrt-runtime") ?? false).toBe(isRuntime(m.name));
    });

    it("depends on @jobrt packages through explicit ranges; runtimes peer-depend on core", () => {
      for (const kind of ["dependencies", "peerDependencies", "devDependencies"] as const) {
        for (const [dep, range] of Object.entries(m[kind] ?? {})) {
          if (dep.startsWith("@jobrt/")) expect(range, `${kind}.${dep}`).toMatch(EXPLICIT_RANGE);
        }
      }
      if (isRuntime(m.name) || m.name === "@jobrt/testkit") {
        expect(m.peerDependencies?.["@jobrt/core"]).toMatch(EXPLICIT_RANGE);
        expect(m.dependencies?.["@jobrt/core"]).toBeUndefined();
      }
    });
  });

  // Only the runtime packages are listed: a case per package that reports "skipped" would be noise.
  describe.each(publishable.filter(([, m]) => isRuntime(m.name)))("%s (runtime)", (dir, m) => {
    it("runs @jobrt/testkit's conformance suite (in its own tests, or in tests/ when it needs a site)", () => {
      const calls = (file: string) => /describeRuntimeConformance\(/.test(readFileSync(file, "utf8"));
      const tsFiles = (d: string) =>
        existsSync(d)
          ? readdirSync(d, { recursive: true })
              .map(String)
              .filter((f) => f.endsWith(".ts"))
              .map((f) => join(d, f))
          : [];
      const own = tsFiles(join(repoRoot, dir, "test")).filter(calls);
      const e2e = tsFiles(join(repoRoot, "tests")).filter(
        (f) => calls(f) && readFileSync(f, "utf8").includes(`${dir}/`),
      );
      expect([...own, ...e2e], `no test calls describeRuntimeConformance for ${dir}`).not.toEqual([]);
      if (own.length > 0) expect(m.devDependencies?.["@jobrt/testkit"]).toMatch(EXPLICIT_RANGE);
    });
  });
});

describe("the Node lines", () => {
  it("engines names exactly the LTS lines the suite runs on: 20 (the main run), 22 and 24 (scripts/node-lines.sh)", () => {
    expect(rootEngines).toBe("^20.19.0 || ^22.12.0 || ^24.0.0");
    const script = readFileSync(join(repoRoot, "scripts/node-lines.sh"), "utf8");
    expect(script).toMatch(/^lines=\$\{JOBRT_NODE_LINES:-22 24\}$/m);
    expect(readFileSync(join(repoRoot, "scripts/test.sh"), "utf8")).toMatch(/^sh scripts\/node-lines\.sh /m);
  });
});
