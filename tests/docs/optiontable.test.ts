import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { repoRoot, runProgram, tempDir } from "../helpers/jobrt.js";

/**
 * Issue 25, item 2: a new `--container-*` option is a row of core's REQUEST_OPTIONS
 * (packages/core/src/requestoptions.ts) plus the runtimes that take it, nothing else. In a scratch
 * copy of the sources, `--container-foo` is added to the table and to runtime shifter's
 * `meta.accepts`; then the copy's own code parses it (run, check, exec), prints it in --help,
 * writes it into the man page and the completion script, builds it into the request, has the host
 * refuse it for a runtime that does not list it and accept it for the one that does, the testkit's
 * fixture carries it, and every package's sources type-check with nothing else changed (the new
 * field in `ContainerRequest` included).
 */

const TABLE = "packages/core/src/requestoptions.ts";
const RUNTIME = "packages/runtime-shifter/src/plugin.ts";

/** Every file of the copy with its content hash, by path inside the copy. */
function snapshot(root: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.name === "node_modules" || entry.name === ".probe") continue;
      if (entry.isDirectory()) walk(path);
      else out.set(relative(root, path), createHash("sha256").update(readFileSync(path)).digest("hex"));
    }
  };
  walk(root);
  return out;
}

function edit(file: string, before: string, after: string): void {
  const text = readFileSync(file, "utf8");
  expect(text, `${file} has ${JSON.stringify(before)}`).toContain(before);
  writeFileSync(file, text.replace(before, after));
}

/** A package name that resolves to the copy's TypeScript sources (vitest transforms them). */
function shim(copy: string, name: string, dir: string): void {
  const target = join(copy, ".probe/shims", name);
  mkdirSync(target, { recursive: true });
  writeFileSync(join(target, "package.json"), JSON.stringify({ name, type: "module", exports: { ".": "./index.ts" } }));
  writeFileSync(join(target, "index.ts"), `export * from ${JSON.stringify(join(copy, dir, "src/index.ts"))};\n`);
  mkdirSync(dirname(join(copy, "node_modules", name)), { recursive: true });
  symlinkSync(target, join(copy, "node_modules", name));
}

/** Links every dependency in from's node_modules into to's, except the workspace's own packages. */
function linkDependencies(from: string, to: string): void {
  if (!existsSync(join(from, "node_modules"))) return;
  for (const entry of readdirSync(join(from, "node_modules"))) {
    if (entry.startsWith(".") || entry === "@jobrt") continue;
    mkdirSync(join(to, "node_modules"), { recursive: true });
    symlinkSync(join(from, "node_modules", entry), join(to, "node_modules", entry));
  }
}

const copy = tempDir("jobrt-option-table-");
let changed: string[] = [];

beforeAll(() => {
  for (const dir of readdirSync(join(repoRoot, "packages"))) {
    cpSync(join(repoRoot, "packages", dir, "src"), join(copy, "packages", dir, "src"), { recursive: true });
    cpSync(join(repoRoot, "packages", dir, "package.json"), join(copy, "packages", dir, "package.json"));
  }
  for (const dir of ["scripts", "docs"]) cpSync(join(repoRoot, dir), join(copy, dir), { recursive: true });
  const before = snapshot(copy);
  edit(
    join(copy, TABLE),
    `  { name: "container-opt",`,
    `  { name: "container-foo", field: "foos", kind: "list", arg: "F", help: "a foo for the runtime" },\n  { name: "container-opt",`,
  );
  edit(join(copy, RUNTIME), `accepts: ["value",`, `accepts: ["foos", "value",`);
  const after = snapshot(copy);
  changed = [...new Set([...before.keys(), ...after.keys()])].filter((f) => before.get(f) !== after.get(f)).sort();
  // The copy sees the repo's dependencies (the root's and each package's own, such as the
  // launcher's yaml); the workspace packages the loaded modules import are its own.
  linkDependencies(repoRoot, copy);
  for (const dir of readdirSync(join(repoRoot, "packages")))
    linkDependencies(join(repoRoot, "packages", dir), join(copy, "packages", dir));
  for (const [name, dir] of [
    ["@jobrt/core", "packages/core"],
    ["@jobrt/launcher", "packages/launcher"],
    ["@jobrt/host-services", "packages/host-services"],
    ["@jobrt/images", "packages/images"],
  ] as const) {
    shim(copy, name, dir);
  }
});

// The copy's modules, loaded from its sources.
const load = async <T>(file: string): Promise<T> => (await import(/* @vite-ignore */ join(copy, file))) as T;
type Args = typeof import("../../packages/cli/src/args.js");
type Help = typeof import("../../packages/cli/src/help.js");
type Core = typeof import("../../packages/core/src/index.js");

describe("a --container-* option added to the option table (scratch copy)", () => {
  it("changes exactly the table and the runtime that takes it", () => {
    expect(changed).toEqual([TABLE, RUNTIME].sort());
  });

  it("is parsed by run, check and exec into its request field, and unknown to gc", async () => {
    const { parseCommandLine, requestFromOptions } = await load<Args>("packages/cli/src/args.ts");
    for (const command of ["run", "check", "exec"] as const) {
      const parsed = parseCommandLine(["--container-foo", "a", "--container-foo=b", "true"], {
        command,
        components: command !== "exec",
        needCommand: true,
      });
      const request = requestFromOptions(parsed.components[0]?.options ?? new Map());
      expect(request, command).toEqual({
        volumes: [],
        modules: [],
        env: [],
        clearEnv: false,
        options: {},
        foos: ["a", "b"],
      });
    }
    expect(() =>
      parseCommandLine(["--container-foo", "a"], { command: "gc", components: false, needCommand: false }),
    ).toThrow("gc: unknown option --container-foo (see jobrt gc --help)");
  });

  it("is in run's and exec's --help and in the man page", async () => {
    const { RUN_HELP, EXEC_HELP, MAIN_HELP, COMMAND_HELP } = await load<Help>("packages/cli/src/help.ts");
    expect(RUN_HELP).toContain("\n      --container-foo F     a foo for the runtime (repeatable)\n");
    expect(EXEC_HELP).toMatch(/--container-foo F,/);
    // scripts/man.mjs reads the built help module: the copy's values, written as that module.
    const dist = join(copy, "packages/cli/dist");
    mkdirSync(dist, { recursive: true });
    writeFileSync(
      join(dist, "help.js"),
      `export const MAIN_HELP = ${JSON.stringify(MAIN_HELP)};\nexport const COMMAND_HELP = ${JSON.stringify(COMMAND_HELP)};\n`,
    );
    const made = await runProgram([process.execPath, join(copy, "scripts/man.mjs")]);
    expect(made.stderr).toBe("");
    expect(readFileSync(join(dist, "man/jobrt.1"), "utf8")).toContain(
      "\\-\\-container\\-foo F     a foo for the runtime (repeatable)",
    );
  });

  it("is completed for run, check and exec, as an option that takes a value", async () => {
    const { completionCommand } = await load<typeof import("../../packages/cli/src/completion.js")>(
      "packages/cli/src/completion.ts",
    );
    let script = "";
    const write = process.stdout.write;
    process.stdout.write = ((text: string) => {
      script += text;
      return true;
    }) as typeof process.stdout.write;
    try {
      await completionCommand(["bash"]);
    } finally {
      process.stdout.write = write;
    }
    const words = (name: string) => (script.match(new RegExp(`^${name}='([^']*)'$`, "m"))?.[1] ?? "").split(" ");
    for (const command of ["run", "check", "exec"])
      expect(words(`_jobrt_opts_${command}`), command).toContain("--container-foo");
    expect(words("_jobrt_opts_gc")).not.toContain("--container-foo");
    expect(words("_jobrt_valued")).toContain("--container-foo");
  });

  it("is refused by the host for a runtime that does not accept it, named as the option, and taken by the one that does", async () => {
    const { checkAccepted, assertRuntimePlugin, REQUEST_FIELDS } = await load<Core>("packages/core/src/index.ts");
    expect(REQUEST_FIELDS).toContain("foos");
    const request = { volumes: [], modules: [], env: [], clearEnv: false, options: {}, foos: ["x"] };
    expect(() => checkAccepted("runtime/oci", ["value", "volumes"], request)).toThrow(
      '--container-foo "x": runtime oci does not accept --container-foo (it takes --container, --container-volume)',
    );
    const shifter = (await load<{ default: Parameters<typeof assertRuntimePlugin>[0] }>(RUNTIME)).default;
    expect(() => assertRuntimePlugin(shifter, "runtime/shifter")).not.toThrow();
    expect(() =>
      checkAccepted("runtime/shifter", (shifter as { meta: { accepts: string[] } }).meta.accepts, request),
    ).not.toThrow();
  });

  it("is in the testkit's container request fixture's type, and the copy's packages type-check", async () => {
    const { containerRequest } = await load<typeof import("../../packages/testkit/src/fixtures.js")>(
      "packages/testkit/src/fixtures.ts",
    );
    expect(containerRequest({ foos: ["y"] } as never)).toMatchObject({ foos: ["y"], volumes: [] });
    const paths: Record<string, string[]> = {};
    for (const dir of readdirSync(join(copy, "packages"))) {
      const { name } = JSON.parse(readFileSync(join(copy, "packages", dir, "package.json"), "utf8")) as {
        name: string;
      };
      paths[name] = [`./packages/${dir}/src/index.ts`];
    }
    mkdirSync(join(copy, ".probe"), { recursive: true });
    writeFileSync(join(copy, ".probe/package.json"), '{"type": "module"}');
    writeFileSync(
      join(copy, ".probe/probe.ts"),
      'import type { ContainerRequest } from "@jobrt/core";\nexport const foos = (c: ContainerRequest): string[] | undefined => c.foos;\n',
    );
    const tsconfig = {
      extends: join(repoRoot, "tsconfig.base.json"),
      compilerOptions: {
        composite: false,
        declaration: false,
        declarationMap: false,
        noEmit: true,
        paths,
        typeRoots: [join(repoRoot, "node_modules/@types")],
      },
      include: ["packages/*/src", ".probe/probe.ts"],
    };
    writeFileSync(join(copy, "tsconfig.json"), JSON.stringify(tsconfig));
    const tsc = await runProgram([join(repoRoot, "node_modules/.bin/tsc"), "-p", join(copy, "tsconfig.json")]);
    expect(tsc.stdout + tsc.stderr).toBe("");
    expect(tsc.code).toBe(0);
  });
});
