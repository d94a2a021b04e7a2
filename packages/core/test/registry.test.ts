import { copyFileSync, cpSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it, vi } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import {
  JobrtError,
  NOT_SUPPORTED,
  type NodeConf,
  RUNTIME_IDX_INVALID,
  type RuntimeName,
  RuntimeRegistry,
  type RuntimeRegistryOptions,
  type StepRecord,
  definePlugin,
  isJobrtError,
} from "../src/index.js";
import { type Calls, deferred, recordingPlugin } from "./helpers.js";

const node: NodeConf = {
  nodeName: "n1",
  confDir: "/nonexistent",
  spoolDir: "/tmp",
  killWait: 1,
  hostUid: 0,
  log: () => {},
};
const step = { jobId: 1, stepId: 0, tasks: [] } as unknown as StepRecord;
const task = { localId: 0, globalId: 0, argv: ["true"], env: {} };

function setup(names = ["oci", "none", "shifter", "x"]) {
  const calls: Calls = { log: [] };
  const plugins = new Map(names.map((n) => [`runtime/${n}`, recordingPlugin(n, calls)]));
  const resolve = vi.fn(async ({ type }: RuntimeName) => {
    const p = plugins.get(type);
    if (!p) throw new JobrtError("ERR_RUNTIME_NOT_FOUND", `no ${type}`);
    return { plugin: p };
  });
  return { calls, resolve, registry: new RuntimeRegistry({ resolveRuntime: resolve }) };
}

describe("RuntimeRegistry", () => {
  it("(a) load returns an index >= 1; empty or missing names mean the default; oci and runtime/oci are one runtime", async () => {
    const { registry, resolve } = setup();
    const a = await registry.load("oci");
    expect(a).toBeGreaterThanOrEqual(1);
    expect(await registry.load("runtime/oci")).toBe(a);
    expect(await registry.load(undefined)).toBe(a);
    expect(await registry.load("")).toBe(a);
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(resolve).toHaveBeenCalledWith({ name: "oci", type: "runtime/oci", base: "oci" });
  });

  it("(a) the default comes from defaultRuntime", async () => {
    const { resolve } = setup();
    const registry = new RuntimeRegistry({ resolveRuntime: resolve, defaultRuntime: "runtime/none" });
    const i = await registry.load("");
    expect(registry.info(i).type).toBe("runtime/none");
  });

  it("(b) indexes are 1, 2, 3 in call order; a loaded name does not init again; index 0 holds nothing", async () => {
    const { registry, calls } = setup();
    expect(await registry.load("none")).toBe(1);
    expect(await registry.load("oci")).toBe(2);
    expect(await registry.load("none")).toBe(1);
    expect(await registry.load("shifter")).toBe(3);
    expect(calls.log.filter((l) => l.endsWith(".init(step)"))).toEqual([
      "none.init(step)",
      "oci.init(step)",
      "shifter.init(step)",
    ]);
    expect(() => registry.plugin(RUNTIME_IDX_INVALID)).toThrow(expect.objectContaining({ code: "ERR_RUNTIME_INDEX" }));
  });

  it("(c) N concurrent loads of one new name resolve and init once and share the index", async () => {
    const gate = deferred<void>();
    const calls: Calls = { log: [] };
    const init = vi.fn(async () => {
      await gate.promise;
    });
    const plugin = recordingPlugin("oci", calls, { init });
    const resolve = vi.fn(async () => ({ plugin }));
    const registry = new RuntimeRegistry({ resolveRuntime: resolve });
    const loads = Array.from({ length: 20 }, () => registry.load("oci"));
    gate.resolve();
    const indexes = await Promise.all(loads);
    expect(new Set(indexes)).toEqual(new Set([1]));
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(init).toHaveBeenCalledTimes(1);
  });

  it("(c) concurrent loads of different names get distinct indexes in call order, even when they finish out of order", async () => {
    const gates = new Map([
      ["runtime/a", deferred<void>()],
      ["runtime/b", deferred<void>()],
      ["runtime/c", deferred<void>()],
    ]);
    const calls: Calls = { log: [] };
    const resolve = vi.fn(async ({ type }: RuntimeName) => {
      await gates.get(type)!.promise;
      return { plugin: recordingPlugin(type.slice(8), calls) };
    });
    const registry = new RuntimeRegistry({ resolveRuntime: resolve });
    const pa = registry.load("a");
    const pb = registry.load("b");
    const pc = registry.load("c");
    gates.get("runtime/c")!.resolve();
    gates.get("runtime/b")!.resolve();
    gates.get("runtime/a")!.resolve();
    expect(await Promise.all([pa, pb, pc])).toEqual([1, 2, 3]);
  });

  it("(d) a failing resolve, validation or init reaches the caller with a code; nothing is published; no hole in the indexes", async () => {
    const calls: Calls = { log: [] };
    let initFails = true;
    const good = recordingPlugin("good", calls);
    const flaky = recordingPlugin("flaky", calls, {
      init: () => {
        if (initFails) throw new Error("device busy");
      },
    });
    const resolve = vi.fn(async ({ type }: RuntimeName) => {
      if (type === "runtime/good") return { plugin: good };
      if (type === "runtime/flaky") return { plugin: flaky };
      if (type === "runtime/shapeless") return { plugin: { meta: { name: "shapeless" } } };
      throw new Error("nope");
    });
    const registry = new RuntimeRegistry({ resolveRuntime: resolve });
    await expect(registry.load("missing")).rejects.toMatchObject({
      code: "ERR_RUNTIME_NOT_FOUND",
      cause: expect.any(Error),
    });
    await expect(registry.load("shapeless")).rejects.toMatchObject({ code: "ERR_RUNTIME_INVALID" });
    await expect(registry.load("flaky")).rejects.toMatchObject({
      code: "ERR_RUNTIME_INIT",
      message: expect.stringContaining("device busy"),
    });
    expect(registry.loaded()).toEqual([]);
    expect(await registry.load("good")).toBe(1);
    initFails = false;
    expect(await registry.load("flaky")).toBe(2);
    expect(resolve).toHaveBeenCalledWith(expect.objectContaining({ type: "runtime/flaky" }));
  });

  it("(d) a concurrent failure does not leave a hole for loads behind it", async () => {
    const gate = deferred<void>();
    const calls: Calls = { log: [] };
    const resolve = vi.fn(async ({ type }: RuntimeName) => {
      if (type === "runtime/bad") {
        await gate.promise;
        throw new JobrtError("ERR_RUNTIME_NOT_FOUND", "bad is not installed");
      }
      return { plugin: recordingPlugin(type.slice(8), calls) };
    });
    const registry = new RuntimeRegistry({ resolveRuntime: resolve });
    const bad = registry.load("bad");
    const good = registry.load("good");
    gate.resolve();
    await expect(bad).rejects.toMatchObject({ code: "ERR_RUNTIME_NOT_FOUND" });
    expect(await good).toBe(1);
  });

  it("(d) an init that hangs fails after initTimeoutMs", async () => {
    const calls: Calls = { log: [] };
    const plugin = recordingPlugin("slow", calls, { init: () => new Promise(() => {}) });
    const registry = new RuntimeRegistry({ resolveRuntime: async () => ({ plugin }), initTimeoutMs: 50 });
    await expect(registry.load("slow")).rejects.toMatchObject({
      code: "ERR_RUNTIME_INIT",
      message: expect.stringContaining("did not finish"),
    });
    expect(registry.loaded()).toEqual([]);
  });

  it("(e) hooks dispatch to the plugin at that index", async () => {
    const { registry, calls } = setup();
    const none = await registry.load("none");
    const oci = await registry.load("oci");
    await registry.setup(oci, { node, step });
    await registry.taskInit(none, { node, step, task, state: undefined });
    expect(await registry.run(oci, { node, step, task, state: undefined })).toBe(NOT_SUPPORTED);
    await registry.cleanup(none, { node, step, state: undefined });
    expect(calls.log.slice(2)).toEqual(["oci.setup", "none.taskInit", "oci.run", "none.cleanup"]);
  });

  it.each([0, -1, 1.5, 7, Number.NaN])("(e) index %s throws ERR_RUNTIME_INDEX", async (bad) => {
    const { registry } = setup();
    await registry.load("oci");
    await expect(registry.setup(bad, { node, step })).rejects.toMatchObject({ code: "ERR_RUNTIME_INDEX" });
    await expect(registry.run(bad, { node, step, task, state: undefined })).rejects.toMatchObject({
      code: "ERR_RUNTIME_INDEX",
    });
    await expect(registry.cleanup(bad, { node, step, state: undefined })).rejects.toMatchObject({
      code: "ERR_RUNTIME_INDEX",
    });
    await expect(registry.taskInit(bad, { node, step, task, state: undefined })).rejects.toMatchObject({
      code: "ERR_RUNTIME_INDEX",
    });
  });

  it("(e) any call after fini throws ERR_RUNTIME_INDEX", async () => {
    const { registry } = setup();
    const i = await registry.load("oci");
    await registry.fini();
    await expect(registry.setup(i, { node, step })).rejects.toMatchObject({ code: "ERR_RUNTIME_INDEX" });
    expect(() => registry.info(i)).toThrow(JobrtError);
  });

  it.each([
    ["undefined", undefined],
    ["a string", "runc run"],
    ["an argv without env", { argv: ["runc"], cwd: "/" }],
    ["an empty argv", { argv: [], env: {}, cwd: "/" }],
    ["env with a number", { argv: ["x"], env: { A: 1 }, cwd: "/" }],
  ])("(f) run returning %s is ERR_RUNTIME_CONTRACT", async (_, value) => {
    const calls: Calls = { log: [] };
    const plugin = recordingPlugin("bad", calls, { run: () => value as never });
    const registry = new RuntimeRegistry({ resolveRuntime: async () => ({ plugin }) });
    const i = await registry.load("bad");
    await expect(registry.run(i, { node, step, task, state: undefined })).rejects.toMatchObject({
      code: "ERR_RUNTIME_CONTRACT",
    });
  });

  it("(f) a valid ExecSpec passes through", async () => {
    const spec = { argv: ["/bin/echo", "hi"], env: { A: "1" }, cwd: "/" };
    const plugin = definePlugin({ name: "e", type: "runtime/e", version: "1", accepts: [] }, { run: () => spec });
    const registry = new RuntimeRegistry({ resolveRuntime: async () => ({ plugin }) });
    expect(await registry.run(await registry.load("e"), { node, step, task, state: undefined })).toBe(spec);
  });

  it("(f) a hook that throws is ERR_RUNTIME_HOOK with runtime, hook and cause", async () => {
    const boom = new Error("disk full");
    const calls: Calls = { log: [] };
    const plugin = recordingPlugin("oci", calls, {
      setup: () => {
        throw boom;
      },
    });
    const registry = new RuntimeRegistry({ resolveRuntime: async () => ({ plugin }) });
    const i = await registry.load("oci");
    const error = await registry.setup(i, { node, step }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobrtError);
    expect(error).toMatchObject({ code: "ERR_RUNTIME_HOOK", runtime: "runtime/oci", hook: "setup", cause: boom });
    expect((error as Error).message).toContain("disk full");
  });

  it("(g) fini calls every fini once in index order even if one throws, names all failures, empties the registry", async () => {
    const calls: Calls = { log: [] };
    const failing = (name: string) =>
      recordingPlugin(name, calls, {
        fini: () => {
          calls.log.push(`${name}.fini`);
          throw new Error(`${name} stuck`);
        },
      });
    const plugins: Record<string, ReturnType<typeof recordingPlugin>> = {
      "runtime/a": recordingPlugin("a", calls),
      "runtime/b": failing("b"),
      "runtime/c": recordingPlugin("c", calls),
      "runtime/d": failing("d"),
    };
    const registry = new RuntimeRegistry({ resolveRuntime: async ({ type }) => ({ plugin: plugins[type] }) });
    for (const n of ["a", "b", "c", "d"]) await registry.load(n);
    calls.log.length = 0;
    const error = await registry.fini().catch((e: unknown) => e);
    expect(calls.log).toEqual(["a.fini", "b.fini", "c.fini", "d.fini"]);
    expect(error).toMatchObject({ code: "ERR_RUNTIME_FINI" });
    expect((error as Error).message).toContain("runtime/b: b stuck");
    expect((error as Error).message).toContain("runtime/d: d stuck");
    expect(registry.loaded()).toEqual([]);
    expect(await registry.load("c")).toBe(1);
  });

  it("(h) loaded() lists index, type, package, version and path", async () => {
    const calls: Calls = { log: [] };
    const registry = new RuntimeRegistry({
      resolveRuntime: async ({ type }) =>
        type === "runtime/oci"
          ? {
              plugin: recordingPlugin("oci", calls),
              origin: { package: "@jobrt/runtime-oci", version: "1.2.3", path: "/opt/x" },
            }
          : { plugin: recordingPlugin("none", calls) },
    });
    await registry.load("none");
    await registry.load("oci");
    expect(registry.loaded()).toEqual([
      { index: 1, type: "runtime/none", name: "none", version: "1.2.3", capabilities: ["test"], accepts: [] },
      {
        index: 2,
        type: "runtime/oci",
        name: "oci",
        version: "1.2.3",
        capabilities: ["test"],
        accepts: [],
        package: "@jobrt/runtime-oci",
        path: "/opt/x",
      },
    ]);
  });

  it("a resolveRuntime that returns no { plugin } (one written in JavaScript) is ERR_RUNTIME_INVALID", async () => {
    const registry = new RuntimeRegistry({
      resolveRuntime: (async () => undefined) as unknown as RuntimeRegistryOptions["resolveRuntime"],
    });
    await expect(registry.load("oci")).rejects.toMatchObject({ code: "ERR_RUNTIME_INVALID" });
  });

  // @jobrt/core 2.0.0's contract, as its docs showed it (`resolve: async (type) => plugin`): a host
  // that built its own registry against 2.0.0 keeps working under every 2.x (issue 40, item 2).
  it("resolve(type) is given the type string and resolves to the plugin itself, as in 2.0.0", async () => {
    const calls: Calls = { log: [] };
    const plugins: Record<string, unknown> = { "runtime/x": recordingPlugin("x", calls) };
    const seen: unknown[] = [];
    const registry = new RuntimeRegistry({
      resolve: async (type) => {
        seen.push(type);
        return plugins[type];
      },
    });
    const i = await registry.load("x");
    expect(seen).toEqual(["runtime/x"]);
    expect(registry.info(i)).toMatchObject({ type: "runtime/x", name: "x", version: "1.2.3" });
    await registry.setup(i, { node, step });
    expect(calls.log).toContain("x.setup");
  });

  it("a resolve(type) that resolves to nothing is ERR_RUNTIME_INVALID, naming the runtime", async () => {
    const registry = new RuntimeRegistry({ resolve: async () => undefined });
    await expect(registry.load("oci")).rejects.toMatchObject({
      code: "ERR_RUNTIME_INVALID",
      message: expect.stringContaining("runtime/oci"),
    });
  });

  it("takes exactly one of resolve and resolveRuntime", () => {
    const both = { resolve: async () => undefined, resolveRuntime: async () => ({ plugin: undefined }) };
    expect(() => new RuntimeRegistry(both)).toThrow(/resolve\(type\) or resolveRuntime\(name\), not both/);
    expect(() => new RuntimeRegistry({})).toThrow(expect.objectContaining({ code: "ERR_RUNTIME_CONTRACT" }));
  });

  it("refuses a plugin whose meta.type does not match the name it was loaded under", async () => {
    const calls: Calls = { log: [] };
    const registry = new RuntimeRegistry({ resolveRuntime: async () => ({ plugin: recordingPlugin("other", calls) }) });
    await expect(registry.load("oci")).rejects.toMatchObject({
      code: "ERR_RUNTIME_INVALID",
      message: expect.stringContaining('"runtime/other"'),
    });
  });

  it("refuses a plugin built for another API major, naming package, path and version", async () => {
    const plugin = definePlugin({ name: "old", type: "runtime/old", version: "0.9.0", apiVersion: 3, accepts: [] }, {});
    const registry = new RuntimeRegistry({
      resolveRuntime: async () => ({
        plugin,
        origin: { package: "jobrt-runtime-old", version: "0.9.0", path: "/srv/node_modules/jobrt-runtime-old" },
      }),
    });
    const error = await registry.load("old").catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "ERR_RUNTIME_API_VERSION" });
    expect((error as Error).message).toMatch(
      /jobrt-runtime-old@0\.9\.0 \(\/srv\/node_modules\/jobrt-runtime-old\).*API 3.*API 2/,
    );
  });
});

describe("a plugin with its own copy of @jobrt/core", () => {
  it("keeps its error's code as causeCode: the copy's JobrtError is known as one here", async () => {
    // A real second module instance of core's build, as a plugin under PluginDir resolves its own.
    const dir = tempDir("jobrt-core-copy-");
    cpSync(fileURLToPath(new URL("../dist", import.meta.url)), join(dir, "dist"), { recursive: true });
    copyFileSync(fileURLToPath(new URL("../package.json", import.meta.url)), join(dir, "package.json"));
    const copy = (await import(pathToFileURL(join(dir, "dist/index.js")).href)) as typeof import("../src/index.js");
    expect(copy.JobrtError).not.toBe(JobrtError);
    const plugin = copy.definePlugin(
      { name: "own", type: "runtime/own", version: "1", accepts: [] },
      {
        setup: () => {
          throw copy.jobrtError("ERR_CONTAINER_REQUEST", { problem: "--container: no image" });
        },
      },
    );
    const registry = new RuntimeRegistry({ resolveRuntime: async () => ({ plugin }) });
    const error = await registry.setup(await registry.load("own"), { node, step }).catch((e: unknown) => e);
    expect(isJobrtError(error, "ERR_RUNTIME_HOOK")).toBe(true);
    expect((error as JobrtError).details.causeCode).toBe("ERR_CONTAINER_REQUEST");
    expect(isJobrtError(new Error("plain"))).toBe(false);
    expect(isJobrtError(Object.assign(new Error("forged"), { code: "ERR_X" }))).toBe(false);
  });
});

describe("RuntimeRegistry.describe (the node log's bundle and digest)", () => {
  const load = async (describe: (ctx: { state: unknown }) => unknown) => {
    // biome-ignore lint/suspicious/noExplicitAny: a plugin that breaks describe's contract on purpose
    const plugin = definePlugin(
      { name: "d", type: "runtime/d", version: "1", accepts: [] },
      { describe: describe as any },
    );
    const registry = new RuntimeRegistry({ resolveRuntime: async () => ({ plugin }) });
    return { registry, index: await registry.load("d") };
  };

  it("hands describe the parsed state and keeps only its string bundle and digest", async () => {
    const seen: unknown[] = [];
    const { registry, index } = await load(({ state }) => {
      seen.push(state);
      return { bundle: "/b", digest: "sha256:ab", other: "x", extra: 1 };
    });
    expect(registry.describe(index, JSON.stringify({ image: "i" }))).toEqual({ bundle: "/b", digest: "sha256:ab" });
    expect(seen).toEqual([{ image: "i" }]);
  });

  it("a describe that throws, answers junk or is missing says nothing, and never throws", async () => {
    for (const bad of [
      () => {
        throw new Error("boom");
      },
      () => "a string",
      () => ({ bundle: 7, digest: null }),
      () => Promise.resolve({ bundle: "/b" }),
    ]) {
      const { registry, index } = await load(bad);
      expect(registry.describe(index, undefined)).toEqual({});
    }
    const plain = new RuntimeRegistry({
      resolveRuntime: async () => ({
        plugin: definePlugin({ name: "p", type: "runtime/p", version: "1", accepts: [] }, {}),
      }),
    });
    expect(plain.describe(await plain.load("p"), "{}")).toEqual({});
  });
});
