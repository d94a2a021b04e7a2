import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_ALLOWED_RUNTIMES, DEFAULT_RUNTIME, RuntimeRegistry, createPackageResolver } from "../src/index.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const coreEntry = new URL("../dist/index.js", import.meta.url).href;

/** Writes a real package into `root/node_modules/<name>` whose default export is a plugin. */
function writePlugin(
  root: string,
  pkg: string,
  opts: { type: string; version?: string; apiVersion?: number; body?: string; exports?: unknown },
) {
  const dir = join(root, "node_modules", pkg);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({
      name: pkg,
      version: opts.version ?? "2.0.0",
      type: "module",
      exports: opts.exports ?? { ".": "./index.js", "./package.json": "./package.json" },
    }),
  );
  const body =
    opts.body ??
    `import { definePlugin } from ${JSON.stringify(coreEntry)};
export default definePlugin({ name: "p", type: ${JSON.stringify(opts.type)}, version: ${JSON.stringify(opts.version ?? "2.0.0")}, apiVersion: ${opts.apiVersion ?? 2} }, {});`;
  writeFileSync(join(dir, "index.js"), body);
  return dir;
}

function site() {
  return tempDir("jobrt-resolver-");
}

describe("createPackageResolver", () => {
  it("resolves x to @jobrt/runtime-x and reports package, version and path", async () => {
    const root = site();
    const dir = writePlugin(root, "@jobrt/runtime-oci", { type: "runtime/oci", version: "3.1.4" });
    const registry = new RuntimeRegistry({ resolve: createPackageResolver({ baseDir: root }) });
    const i = await registry.load("oci");
    expect(registry.info(i)).toMatchObject({ package: "@jobrt/runtime-oci", version: "3.1.4", path: dir });
  });

  it("is a 2.0.0 resolve(type): called with a type string it gives the plugin, and a host's own resolve may wrap it", async () => {
    const root = site();
    writePlugin(root, "@jobrt/runtime-oci", { type: "runtime/oci", version: "3.1.4" });
    const resolve = createPackageResolver({ baseDir: root });
    expect(await resolve("runtime/oci")).toMatchObject({ meta: { type: "runtime/oci", version: "3.1.4" } });
    const registry = new RuntimeRegistry({ resolve: (type) => resolve(type) });
    expect(registry.info(await registry.load("oci"))).toMatchObject({ type: "runtime/oci", version: "3.1.4" });
  });

  it("resolves x to jobrt-runtime-x and @scope/x to @scope/jobrt-runtime-x", async () => {
    const root = site();
    writePlugin(root, "jobrt-runtime-thing", { type: "runtime/thing" });
    writePlugin(root, "@acme/jobrt-runtime-fast", { type: "runtime/@acme/fast" });
    const registry = new RuntimeRegistry({
      resolve: createPackageResolver({ baseDir: root, allow: ["thing", "@acme/fast"] }),
    });
    expect(registry.info(await registry.load("thing")).package).toBe("jobrt-runtime-thing");
    expect(registry.info(await registry.load("@acme/fast")).package).toBe("@acme/jobrt-runtime-fast");
  });

  it("reads its allowlist once, when it is made: a load does not normalise it again", async () => {
    const root = site();
    writePlugin(root, "jobrt-runtime-thing", { type: "runtime/thing" });
    let reads = 0;
    const list = ["runtime/thing", "none"];
    // Counts every read of an entry: the allowlist was normalised per entry on every load.
    const allow = new Proxy(list, {
      get(target, key, receiver) {
        if (typeof key === "string" && /^\d+$/.test(key)) reads++;
        return Reflect.get(target, key, receiver);
      },
    });
    const resolve = createPackageResolver({ baseDir: root, allow });
    const made = reads;
    expect(made).toBeGreaterThan(0);
    const registry = new RuntimeRegistry({ resolve });
    await registry.load("thing");
    await expect(registry.load("other")).rejects.toMatchObject({ code: "ERR_RUNTIME_NOT_ALLOWED" });
    await expect(resolve("runtime/none")).rejects.toMatchObject({
      code: "ERR_RUNTIME_NOT_FOUND",
    });
    expect(reads).toBe(made);
  });

  it("names the default runtime in one place, among the first-party runtimes allowed by default", () => {
    expect(DEFAULT_RUNTIME).toBe("oci");
    expect(DEFAULT_ALLOWED_RUNTIMES).toContain(DEFAULT_RUNTIME);
    expect(new RuntimeRegistry({ resolveRuntime: async () => ({ plugin: undefined }) }).defaultRuntime).toBe(
      DEFAULT_RUNTIME,
    );
  });

  it("refuses a runtime outside RuntimePlugins before looking for it", async () => {
    const root = site();
    writePlugin(root, "jobrt-runtime-thing", { type: "runtime/thing" });
    const registry = new RuntimeRegistry({ resolve: createPackageResolver({ baseDir: root, allow: ["none"] }) });
    await expect(registry.load("thing")).rejects.toMatchObject({ code: "ERR_RUNTIME_NOT_ALLOWED" });
  });

  it("says which packages it looked for when none is installed", async () => {
    const registry = new RuntimeRegistry({ resolve: createPackageResolver({ baseDir: site(), allow: ["ghost"] }) });
    await expect(registry.load("ghost")).rejects.toMatchObject({
      code: "ERR_RUNTIME_NOT_FOUND",
      message: expect.stringContaining("@jobrt/runtime-ghost, jobrt-runtime-ghost"),
    });
  });

  it("treats both packages installed as an ambiguity", async () => {
    const root = site();
    writePlugin(root, "@jobrt/runtime-dup", { type: "runtime/dup" });
    writePlugin(root, "jobrt-runtime-dup", { type: "runtime/dup" });
    const registry = new RuntimeRegistry({ resolve: createPackageResolver({ baseDir: root, allow: ["dup"] }) });
    await expect(registry.load("dup")).rejects.toMatchObject({ code: "ERR_RUNTIME_AMBIGUOUS" });
  });

  it("refuses another API major, naming the package, its path and version", async () => {
    const root = site();
    const dir = writePlugin(root, "jobrt-runtime-future", { type: "runtime/future", apiVersion: 3, version: "9.0.0" });
    const registry = new RuntimeRegistry({ resolve: createPackageResolver({ baseDir: root, allow: ["future"] }) });
    const error = await registry.load("future").catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "ERR_RUNTIME_API_VERSION" });
    expect((error as Error).message).toContain(`jobrt-runtime-future@9.0.0 (${dir})`);
  });

  it("an init that fails names the package it came from, as the earlier checks do", async () => {
    const root = site();
    const dir = writePlugin(root, "jobrt-runtime-busy", {
      type: "runtime/busy",
      version: "1.2.0",
      body: `import { definePlugin } from ${JSON.stringify(coreEntry)};
export default definePlugin({ name: "busy", type: "runtime/busy", version: "1.2.0", apiVersion: 2, accepts: [] }, { init() { throw new Error("device busy"); } });`,
    });
    const registry = new RuntimeRegistry({ resolve: createPackageResolver({ baseDir: root, allow: ["busy"] }) });
    const error = await registry.load("busy").catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: "ERR_RUNTIME_INIT",
      details: { runtime: "runtime/busy", hook: "init", package: "jobrt-runtime-busy", version: "1.2.0", path: dir },
    });
  });

  it("refuses a module whose default export is not a plugin, and one that fails to import", async () => {
    const root = site();
    writePlugin(root, "jobrt-runtime-empty", { type: "runtime/empty", body: "export const x = 1;" });
    writePlugin(root, "jobrt-runtime-broken", { type: "runtime/broken", body: "throw new Error('top-level boom');" });
    const registry = new RuntimeRegistry({
      resolve: createPackageResolver({ baseDir: root, allow: ["empty", "broken"] }),
    });
    await expect(registry.load("empty")).rejects.toMatchObject({
      code: "ERR_RUNTIME_INVALID",
      message: expect.stringContaining("default export is undefined"),
    });
    await expect(registry.load("broken")).rejects.toMatchObject({
      code: "ERR_RUNTIME_INVALID",
      message: expect.stringContaining("top-level boom"),
    });
  });

  it.each([
    ["a string exports (no ./package.json export)", "./index.js"],
    ["an import-only condition", { ".": { import: "./index.js" } }],
    ["bare conditions", { node: "./index.js" }],
  ])("finds packages whose exports use %s", async (_, exports) => {
    const root = site();
    writePlugin(root, "jobrt-runtime-shape", { type: "runtime/shape", exports });
    const registry = new RuntimeRegistry({ resolve: createPackageResolver({ baseDir: root, allow: ["shape"] }) });
    expect(registry.info(await registry.load("shape")).package).toBe("jobrt-runtime-shape");
  });

  it("refuses an entry point outside the package", async () => {
    const root = site();
    writePlugin(root, "jobrt-runtime-escape", { type: "runtime/escape", exports: "../jobrt-runtime-other/index.js" });
    writePlugin(root, "jobrt-runtime-other", { type: "runtime/escape" });
    const registry = new RuntimeRegistry({ resolve: createPackageResolver({ baseDir: root, allow: ["escape"] }) });
    await expect(registry.load("escape")).rejects.toMatchObject({
      code: "ERR_RUNTIME_INVALID",
      message: expect.stringContaining("no importable entry point"),
    });
  });

  it("resolves from the base directory, never from the process cwd", async () => {
    const elsewhere = site();
    writePlugin(elsewhere, "jobrt-runtime-cwd", { type: "runtime/cwd" });
    const cwd = process.cwd();
    process.chdir(elsewhere);
    try {
      const registry = new RuntimeRegistry({ resolve: createPackageResolver({ baseDir: site(), allow: ["cwd"] }) });
      await expect(registry.load("cwd")).rejects.toMatchObject({ code: "ERR_RUNTIME_NOT_FOUND" });
    } finally {
      process.chdir(cwd);
    }
  });

  it("never resolves from NODE_PATH or $HOME/.node_modules, which come from the caller's environment", () => {
    // Node appends those to require's lookup path when its process starts: a process of its own.
    const planted = site();
    const marker = join(planted, "imported");
    const body = `import { writeFileSync } from "node:fs";\nwriteFileSync(${JSON.stringify(marker)}, "");\nexport default {};`;
    writePlugin(join(planted, "path"), "jobrt-runtime-planted", { type: "runtime/planted", body });
    writePlugin(join(planted, "home"), "jobrt-runtime-homed", { type: "runtime/homed", body });
    const home = join(planted, "home", "home");
    mkdirSync(home);
    symlinkSync(join(planted, "home", "node_modules"), join(home, ".node_modules"));
    const script = `import { RuntimeRegistry, createPackageResolver } from ${JSON.stringify(coreEntry)};
const registry = new RuntimeRegistry({ resolve: createPackageResolver({ baseDir: ${JSON.stringify(site())}, allow: ["planted", "homed"] }) });
for (const name of ["planted", "homed"]) console.log(await registry.load(name).then(() => "loaded", (e) => e.code));`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
      env: { ...process.env, NODE_PATH: join(planted, "path", "node_modules"), HOME: home },
    });
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("ERR_RUNTIME_NOT_FOUND\nERR_RUNTIME_NOT_FOUND\n");
    expect(existsSync(marker)).toBe(false);
  });
});
