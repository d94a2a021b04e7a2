import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot, tempDir } from "../helpers/jobrt.js";

// scripts/peer-floor.mjs against a small tree: a plugin whose peer range admits the last released
// core must use only what that core had, names and catalog codes alike (issue 40, item 1).

const script = join(repoRoot, "scripts/peer-floor.mjs");

function writeJson(file: string, value: unknown): void {
  mkdirSync(join(file, ".."), { recursive: true });
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

/** Core 2.0.0 released with `load` and ERR_OLD; the tree's core is `coreVersion`, with ERR_NEW too. */
function tree(coreVersion: string, pluginSource: string, range = "workspace:^2.0.0"): string {
  const root = tempDir("jobrt-peerfloor-");
  writeJson(join(root, "api/released/core.json"), {
    package: "@jobrt/core",
    version: "2.0.0",
    exports: { load: { kind: "function", text: "function load(): void" } },
  });
  writeJson(join(root, "api/released/error-codes.json"), {
    package: "@jobrt/core",
    version: "2.0.0",
    codes: ["ERR_OLD"],
  });
  writeJson(join(root, "packages/core/package.json"), { name: "@jobrt/core", version: coreVersion });
  mkdirSync(join(root, "packages/core/src"));
  writeFileSync(
    join(root, "packages/core/src/catalog.ts"),
    "export const ERROR_CATALOG = {\n  ERR_OLD: {},\n  ERR_NEW: {},\n};\n",
  );
  writeJson(join(root, "packages/plugin/package.json"), {
    name: "@acme/plugin",
    version: "1.0.0",
    peerDependencies: { "@jobrt/core": range },
  });
  mkdirSync(join(root, "packages/plugin/src"));
  writeFileSync(join(root, "packages/plugin/src/index.ts"), pluginSource);
  return root;
}

function floor(root: string, ...args: string[]) {
  const r = spawnSync(process.execPath, [script, "--root", root, ...args], { encoding: "utf8" });
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
}

const peerOf = (root: string) =>
  JSON.parse(readFileSync(join(root, "packages/plugin/package.json"), "utf8")).peerDependencies["@jobrt/core"];

describe("peer-floor", () => {
  it("passes a plugin that uses only what the released core had", () => {
    const r = floor(tree("2.1.0", 'import { load } from "@jobrt/core";\nthrow jobrtError("ERR_OLD");\n'));
    expect(r.status, r.stderr).toBe(0);
  });

  it("fails, in one line naming the package, what is missing and the range to write, a newer import or code", () => {
    const root = tree(
      "2.1.0",
      'import { load, type Fresh, newThing as n } from "@jobrt/core";\nexport { other } from "@jobrt/core";\nf("ERR_NEW");\n',
    );
    const r = floor(root);
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("@acme/plugin: its peer range workspace:^2.0.0 on @jobrt/core admits 2.0.0");
    expect(lines[0]).toContain("lacks Fresh, newThing, other, ERR_NEW");
    expect(lines[0]).toContain('write "workspace:^2.1.0"');
    expect(peerOf(root)).toBe("workspace:^2.0.0");
  });

  it("--fix raises the range to the tree's core, keeping workspace:; then the check passes", () => {
    const root = tree("2.1.0", 'import { fresh } from "@jobrt/core";\n');
    const fixed = floor(root, "--fix");
    expect(fixed.status, fixed.stderr).toBe(0);
    expect(peerOf(root)).toBe("workspace:^2.1.0");
    expect(floor(root).status).toBe(0);
  });

  it("a core not versioned yet: --fix cannot raise the range and says to version first", () => {
    const root = tree("2.0.0", 'import { fresh } from "@jobrt/core";\n', "^2.0.0");
    const r = floor(root, "--fix");
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("core is still 2.0.0: run pnpm changeset version first");
    expect(peerOf(root)).toBe("^2.0.0");
  });

  it("a range above the released core is left alone", () => {
    const r = floor(tree("2.1.0", 'import { fresh } from "@jobrt/core";\n', "^2.1.0"));
    expect(r.status, r.stderr).toBe(0);
  });

  it("--record writes the tree's catalog codes as the released ones", () => {
    const root = tree("2.1.0", "");
    expect(floor(root, "--record").status).toBe(0);
    const rec = JSON.parse(readFileSync(join(root, "api/released/error-codes.json"), "utf8"));
    expect(rec).toEqual({ package: "@jobrt/core", version: "2.1.0", codes: ["ERR_NEW", "ERR_OLD"] });
  });

  it("this tree's record of the last release's catalog is of the same core as its API record", () => {
    const rec = JSON.parse(readFileSync(join(repoRoot, "api/released/error-codes.json"), "utf8"));
    const core = JSON.parse(readFileSync(join(repoRoot, "api/released/core.json"), "utf8"));
    expect(rec.version).toBe(core.version);
    expect(rec.codes).toContain("ERR_CONF");
  });
});
