import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot, tempDir } from "../helpers/jobrt.js";

// scripts/api-compat.mjs against a one-package tree: a removed or changed export, or a member of an
// exported interface, needs a major changeset; an addition does not (issue 40, item 2).

const script = join(repoRoot, "scripts/api-compat.mjs");

const V1_DTS = `/** Loads things. */
export interface LoaderOptions {
    resolve: (type: string) => Promise<unknown>;
    timeoutMs?: number;
}
export declare function load(name: string, options: LoaderOptions): Promise<number>;
export { helper } from "./helper.js";
`;

function tree(): string {
  const root = tempDir("jobrt-apicompat-");
  const pkg = join(root, "packages/thing");
  mkdirSync(join(pkg, "dist"), { recursive: true });
  mkdirSync(join(root, ".changeset"));
  writeFileSync(
    join(pkg, "package.json"),
    JSON.stringify({
      name: "@acme/thing",
      version: "2.0.0",
      exports: { ".": { types: "./dist/index.d.ts", default: "./dist/index.js" } },
    }),
  );
  writeFileSync(join(pkg, "dist/index.js"), "export function load() {}\nexport function helper() {}\n");
  writeFileSync(join(pkg, "dist/index.d.ts"), V1_DTS);
  writeFileSync(join(pkg, "dist/helper.d.ts"), "export declare function helper(): void;\n");
  const recorded = compat(root, "--record");
  expect(recorded.status, recorded.stderr).toBe(0);
  return root;
}

function compat(root: string, ...args: string[]) {
  const r = spawnSync(process.execPath, [script, "--root", root, ...args], { encoding: "utf8" });
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
}

const editDts = (root: string, file: string, edit: (text: string) => string) => {
  const path = join(root, "packages/thing/dist", file);
  writeFileSync(path, edit(readFileSync(path, "utf8")));
};

const changeset = (root: string, bump: string) =>
  writeFileSync(join(root, ".changeset/change.md"), `---\n"@acme/thing": ${bump}\n---\n\nA change.\n`);

describe("api-compat", () => {
  it("records the released API and passes on the same build", () => {
    const root = tree();
    const released = JSON.parse(readFileSync(join(root, "api/released/thing.json"), "utf8"));
    expect(released).toMatchObject({
      package: "@acme/thing",
      version: "2.0.0",
      exports: {
        LoaderOptions: { kind: "interface", members: { resolve: "resolve: (type: string) => Promise<unknown>" } },
        helper: { kind: "function", text: "function helper(): void" },
      },
    });
    expect(compat(root).status).toBe(0);
    expect(compat(root, "--released").status).toBe(0);
  });

  it("fails on a changed member of an exported interface under a minor changeset, naming it, and passes under a major", () => {
    const root = tree();
    editDts(root, "index.d.ts", (t) => t.replace("(type: string)", "(name: { type: string })"));
    changeset(root, "minor");
    const r = compat(root);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("@acme/thing changed its API since 2.0.0");
    expect(r.stderr).toContain("with a minor (.changeset/change.md), which needs a major");
    expect(r.stderr).toContain(
      "LoaderOptions.resolve changed: resolve: (type: string) => Promise<unknown> -> resolve: (name: { type: string }) => Promise<unknown>",
    );
    changeset(root, "major");
    expect(compat(root).status).toBe(0);
  });

  it("fails on a removed export, followed through a re-export, and on a changed function", () => {
    const root = tree();
    editDts(root, "helper.d.ts", (t) => t.replace("helper(): void", "helper(x: number): void"));
    editDts(root, "index.d.ts", (t) => t.replace("export declare function load", "declare function load"));
    writeFileSync(join(root, "packages/thing/dist/index.js"), "export function helper() {}\n");
    const r = compat(root);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      "with no changeset, which needs a major: helper changed: function helper(): void -> function helper(x: number): void; load removed",
    );
  });

  it("passes additions: a new export and a new optional member", () => {
    const root = tree();
    editDts(root, "index.d.ts", (t) =>
      t
        .replace("timeoutMs?: number;", "timeoutMs?: number;\n    resolveRuntime?: (name: string) => Promise<unknown>;")
        .concat("export type Extra = string;\n"),
    );
    changeset(root, "minor");
    expect(compat(root).status).toBe(0);
  });

  it("skips a change listed in api/compatible.txt, and fails on a line that matches no change", () => {
    const root = tree();
    editDts(root, "index.d.ts", (t) => t.replace("resolve: (type", "resolve?: (type"));
    expect(compat(root).status).toBe(1);
    const accept = join(root, "api/compatible.txt");
    writeFileSync(accept, "@acme/thing LoaderOptions.resolve optional: resolveRuntime may replace it\n");
    expect(compat(root).status).toBe(0);
    writeFileSync(accept, "@acme/thing load reviewed\n@acme/thing LoaderOptions.resolve optional\n");
    const stale = compat(root);
    expect(stale.status).toBe(1);
    expect(stale.stderr).toContain('api/compatible.txt: "@acme/thing load" matches no change');
  });

  it("--released fails when api/released is not the build being published; --record refuses pending changesets", () => {
    const root = tree();
    const manifest = join(root, "packages/thing/package.json");
    writeFileSync(manifest, readFileSync(manifest, "utf8").replace('"2.0.0"', '"2.1.0"'));
    const r = compat(root, "--released");
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("records @acme/thing@2.0.0, not the 2.1.0 being published");
    changeset(root, "minor");
    expect(compat(root, "--record").stderr).toContain(".changeset/ still holds changesets (for @acme/thing)");
    rmSync(join(root, ".changeset/change.md"));
    expect(compat(root, "--record").status).toBe(0);
    expect(compat(root, "--released").status).toBe(0);
  });
});

describe("api-compat on this tree", () => {
  it("@jobrt/core keeps RuntimeResolver, the 2.0.0 resolve(type) contract, as released", () => {
    const released = JSON.parse(readFileSync(join(repoRoot, "api/released/core.json"), "utf8"));
    expect(released.version).toBe("2.0.0");
    expect(released.exports.RuntimeResolver.text).toBe("type RuntimeResolver = (type: string) => Promise<unknown>");
    expect(compat(repoRoot).status).toBe(0);
  });
});
