import { describe, expect, it } from "vitest";
import {
  type ContainerRequest,
  type ExecSpec,
  type NodeConf,
  RUNTIME_API_VERSION,
  RuntimeRegistry,
  type StepRecord,
  type TaskRecord,
  definePlugin,
  isExecSpec,
} from "../src/index.js";

const logged: string[] = [];
const node: NodeConf = {
  nodeName: "n1",
  confDir: "/nonexistent",
  spoolDir: "/tmp",
  killWait: 1,
  hostUid: 0,
  log: (l, m) => logged.push(`${l}:${m}`),
};
const task: TaskRecord = { localId: 0, globalId: 3, argv: ["true"], env: {} };

function request(over: Partial<ContainerRequest> = {}): ContainerRequest {
  return { volumes: [], modules: [], env: [], clearEnv: false, options: {}, ...over };
}

function stepWith(container?: ContainerRequest): StepRecord {
  return { jobId: 1, stepId: 0, tasks: [task], ...(container ? { container } : {}) } as unknown as StepRecord;
}

async function registryFor(plugin: unknown): Promise<{ registry: RuntimeRegistry; index: number }> {
  const registry = new RuntimeRegistry({ resolveRuntime: async () => ({ plugin }) });
  return { registry, index: await registry.load("t") };
}

describe("plugin contract API 2", () => {
  it("is API 2", () => {
    expect(RUNTIME_API_VERSION).toBe(2);
  });

  it("each hook gets one context object: node, step, log, client for setup, task and state where they apply", async () => {
    const seen: Record<string, Record<string, unknown>> = {};
    const plugin = definePlugin(
      { name: "t", type: "runtime/t", version: "1", accepts: [] },
      {
        init: (ctx) => {
          seen.init = { ...ctx };
        },
        setup: (ctx) => {
          seen.setup = { ...ctx };
        },
        taskInit: (ctx) => {
          seen.taskInit = { ...ctx };
        },
        run: (ctx) => {
          seen.run = { ...ctx };
          return { argv: ["/bin/true"], env: {}, cwd: "/" };
        },
        cleanup: (ctx) => {
          seen.cleanup = { ...ctx };
        },
        validate: (ctx) => {
          seen.validate = { ...ctx };
        },
      },
    );
    const { registry, index } = await registryFor(plugin);
    const step = stepWith();
    await registry.validate(index, { node, step });
    const state = await registry.setup(index, { node, step, client: { verbose: 2 } });
    await registry.taskInit(index, { node, step, task, state });
    await registry.run(index, { node, step, task, state });
    await registry.cleanup(index, { node, step, state });
    expect(seen.init).toEqual({ context: "step" });
    expect(Object.keys(seen.validate ?? {}).sort()).toEqual(["log", "node", "step"]);
    expect(seen.setup).toMatchObject({ node, step, client: { verbose: 2 } });
    expect(Object.keys(seen.setup ?? {}).sort()).toEqual(["client", "log", "node", "step"]);
    expect(Object.keys(seen.taskInit ?? {}).sort()).toEqual(["log", "node", "state", "step", "task"]);
    expect(seen.run).toMatchObject({ node, step, task, state: undefined });
    expect(seen.cleanup).toMatchObject({ node, step, state: undefined, afterCrash: false });
    const log = seen.run?.log as NodeConf["log"];
    log("info", "from the plugin");
    expect(logged).toContain("info:from the plugin");
  });

  it("setup's state comes back as JSON text, and every later hook gets its own equal copy", async () => {
    const made = { image: "sha256:abc", tasks: [1, 2], nested: { ok: true, none: null } };
    const got: unknown[] = [];
    const plugin = definePlugin<typeof made>(
      { name: "t", type: "runtime/t", version: "1", accepts: [] },
      {
        setup: () => made,
        taskInit: ({ state }) => void got.push(state),
        run: ({ state }) => {
          got.push(state);
          return { argv: ["/bin/true"], env: {}, cwd: "/" };
        },
        cleanup: ({ state, afterCrash }) => void got.push(state, afterCrash),
      },
    );
    const { registry, index } = await registryFor(plugin);
    const step = stepWith();
    const state = await registry.setup(index, { node, step });
    expect(typeof state).toBe("string");
    expect(JSON.parse(state as string)).toEqual(made);
    await registry.taskInit(index, { node, step, task, state });
    await registry.run(index, { node, step, task, state });
    await registry.cleanup(index, { node, step, state, afterCrash: true });
    expect(got).toEqual([made, made, made, true]);
    // Never the object setup returned: a hook in this process sees what one in another process sees.
    expect(got.some((g) => g === made)).toBe(false);
    expect(got[0]).not.toBe(got[1]);
  });

  it("a setup without state gives undefined to every hook", async () => {
    const plugin = definePlugin({ name: "t", type: "runtime/t", version: "1", accepts: [] }, { setup: () => {} });
    const { registry, index } = await registryFor(plugin);
    expect(await registry.setup(index, { node, step: stepWith() })).toBeUndefined();
  });

  it.each([
    ["a Map", () => ({ m: new Map() }), "state.m is a Map"],
    ["a function", () => ({ f: () => 1 }), "state.f is a function"],
    ["NaN", () => ({ list: [1, Number.NaN] }), "state.list[1] is NaN"],
    [
      "a cycle",
      () => {
        const a: Record<string, unknown> = {};
        a.self = a;
        return a;
      },
      "state.self is a cycle",
    ],
    ["a class instance", () => ({ when: new Date(0) }), "state.when is a Date"],
  ])("a state holding %s is ERR_RUNTIME_CONTRACT naming where", async (_, make, where) => {
    const plugin = definePlugin({ name: "t", type: "runtime/t", version: "1", accepts: [] }, { setup: make as never });
    const { registry, index } = await registryFor(plugin);
    const error = await registry.setup(index, { node, step: stepWith() }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "ERR_RUNTIME_CONTRACT" });
    expect((error as Error).message).toContain(
      "runtime runtime/t setup returned a step state that cannot be journaled",
    );
    expect((error as Error).message).toContain(where);
  });

  describe("meta.accepts", () => {
    it("is required by the types, and a plain-JS plugin without it is loaded as taking nothing", () => {
      // The typecheck (scripts/test.sh) fails if this line ever compiles: a container runtime that
      // left accepts out type-checked and then had every step's --container refused at run time.
      // @ts-expect-error accepts is required
      const plugin = definePlugin({ name: "t", type: "runtime/t", version: "1" }, {});
      expect(plugin.meta.accepts).toEqual([]);
    });

    const calls: string[] = [];
    const accepting = (accepts: string[] | undefined) =>
      definePlugin(
        { name: "t", type: "runtime/t", version: "1", accepts: accepts as never },
        { setup: () => void calls.push("setup"), validate: () => void calls.push("validate") },
      );

    it.each([
      [
        ["value"],
        request({ value: "img", modules: ["gpu"] }),
        '--container-module "gpu": runtime t does not accept --container-module (it takes --container)',
      ],
      [
        ["value", "volumes"],
        request({ value: "img", entrypoint: "/x" }),
        '--container-entrypoint "/x": runtime t does not accept --container-entrypoint (it takes --container, --container-volume)',
      ],
      [
        ["value", "options.image"],
        request({ options: { image: ["a"], foo: ["b"] } }),
        '--container-opt "foo=b": runtime t does not accept --container-opt (it takes --container, --container-opt image=...)',
      ],
      // A runtime that cannot apply devices must not run the step without them.
      [
        ["value"],
        request({ value: "b", devices: ["nvidia.com/gpu=0"] }),
        '--container-device "nvidia.com/gpu=0": runtime t does not accept --container-device (it takes --container)',
      ],
      [
        [],
        request({ clearEnv: true }),
        "--container-clearenv: runtime t does not accept --container-clearenv (it takes no container options)",
      ],
      [
        undefined,
        request({ value: "img" }),
        '--container "img": runtime t does not accept --container (it takes no container options)',
      ],
    ])("accepts %j refuses the others before setup or validate runs, in one message", async (accepts, c, message) => {
      calls.length = 0;
      const { registry, index } = await registryFor(accepting(accepts));
      for (const hook of ["setup", "validate"] as const) {
        const error = await registry[hook](index, { node, step: stepWith(c) }).catch((e: unknown) => e);
        expect(error).toMatchObject({ code: "ERR_CONTAINER_REQUEST", message, runtime: "runtime/t" });
      }
      expect(calls).toEqual([]);
    });

    // The host resolves jobrt.conf CdiDefaultDevices into deviceEdits with no --container-device
    // given: a runtime that cannot apply them must not run the step without the site's devices.
    it("refuses a site default device (deviceEdits without --container-device) to a runtime without devices, before setup", async () => {
      calls.length = 0;
      const edits = {
        devices: ["nvidia.com/gpu=0"],
        deviceNodes: [],
        mounts: [],
        env: [],
        additionalGids: [],
        hooks: [],
      };
      const { registry, index } = await registryFor(accepting(["value"]));
      const error = await registry
        .setup(index, { node, step: stepWith(request({ value: "b", deviceEdits: edits })) })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({
        code: "ERR_CONTAINER_REQUEST",
        runtime: "runtime/t",
        details: { key: "CdiDefaultDevices" },
      });
      expect((error as Error).message).toBe(
        "jobrt.conf CdiDefaultDevices gives this step nvidia.com/gpu=0: runtime t cannot apply devices (its meta.accepts has no devices): use a runtime that can (docs/devices.md)",
      );
      expect(calls).toEqual([]);
      const ok = await registryFor(accepting(["value", "devices"]));
      await ok.registry.setup(ok.index, { node, step: stepWith(request({ value: "b", deviceEdits: edits })) });
      expect(calls).toEqual(["setup"]);
    });

    it("lets through what is declared (options as a whole, or by key)", async () => {
      calls.length = 0;
      const { registry, index } = await registryFor(accepting(["value", "volumes", "env", "options.image"]));
      await registry.setup(index, {
        node,
        step: stepWith(request({ value: "i", volumes: ["/a:/b"], env: ["A=1"], options: { image: ["r"] } })),
      });
      const all = await registryFor(accepting(["options"]));
      await all.registry.validate(all.index, { node, step: stepWith(request({ options: { anything: ["1"] } })) });
      await all.registry.setup(all.index, { node, step: stepWith() });
      expect(calls).toEqual(["setup", "validate", "setup"]);
    });

    it("a malformed accepts list is ERR_RUNTIME_INVALID at load", async () => {
      const registry = new RuntimeRegistry({ resolveRuntime: async () => ({ plugin: accepting(["volume"]) }) });
      await expect(registry.load("t")).rejects.toMatchObject({
        code: "ERR_RUNTIME_INVALID",
        message: expect.stringContaining("meta.accepts must list request fields"),
      });
    });
  });

  it("an API 1 plugin is refused with ERR_RUNTIME_API_VERSION naming the API it needs, before its shape is judged", async () => {
    // What an API 1 plugin object looks like: positional hooks, no accepts.
    const api1 = {
      meta: { name: "t", type: "runtime/t", version: "1.4.0", apiVersion: 1 },
      init() {},
      fini() {},
      setup(_node: NodeConf, _step: StepRecord) {},
      cleanup(_node: NodeConf, _step: StepRecord) {},
      taskInit(_node: NodeConf, _step: StepRecord, _task: TaskRecord) {},
      run(_node: NodeConf, _step: StepRecord, _task: TaskRecord): ExecSpec | symbol {
        return Symbol.for("jobrt.runtime.NOT_SUPPORTED");
      },
    };
    const registry = new RuntimeRegistry({ resolveRuntime: async () => ({ plugin: api1 }) });
    const error = await registry.load("t").catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "ERR_RUNTIME_API_VERSION", details: { apiVersion: 1, needed: 2 } });
    expect((error as Error).message).toBe(
      'runtime runtime/t was built for runtime API 1, this jobrt needs API 2: install a version of the plugin made for API 2 (docs/writing-a-runtime.md, "Moving from API 1 to API 2")',
    );
  });

  it("ExecSpec signals is group or leader", () => {
    const base = { argv: ["/bin/true"], env: {}, cwd: "/" };
    expect(isExecSpec({ ...base, signals: "leader" })).toBe(true);
    expect(isExecSpec({ ...base, signals: "group" })).toBe(true);
    expect(isExecSpec({ ...base, signals: "session" })).toBe(false);
  });

  it("ExecSpec supervise: a known stop target, a missing-command check with view, cwd and exit codes", () => {
    const base = { argv: ["/usr/bin/bwrap"], env: {}, cwd: "/" };
    const check = { command: "x", view: { root: "/", mounts: [{ destination: "/tmp" }] }, cwd: "/", exitCodes: [1] };
    expect(isExecSpec({ ...base, supervise: {} })).toBe(true);
    expect(isExecSpec({ ...base, supervise: { stop: "child-group", missingCommand: check } })).toBe(true);
    expect(isExecSpec({ ...base, supervise: { missingCommand: { ...check, path: "/bin" } } })).toBe(true);
    expect(isExecSpec({ ...base, supervise: { stop: "everyone" } })).toBe(false);
    expect(isExecSpec({ ...base, supervise: { missingCommand: { ...check, exitCodes: [0] } } })).toBe(false);
    expect(isExecSpec({ ...base, supervise: { missingCommand: { ...check, command: "" } } })).toBe(false);
    expect(isExecSpec({ ...base, supervise: { missingCommand: { ...check, view: { root: "/" } } } })).toBe(false);
    expect(isExecSpec({ ...base, supervise: "child-group" })).toBe(false);
  });
});

describe("the optional tools and check hooks (jobrt runtimes, jobrt check)", () => {
  const base = { name: "t", type: "runtime/t", version: "1", accepts: [] };

  it("a plugin without them loads and answers undefined: third-party plugins of before keep working", async () => {
    const { registry, index } = await registryFor(definePlugin(base, {}));
    expect(await registry.tools(index, node)).toBeUndefined();
    expect(await registry.check(index, { node, step: stepWith() })).toBeUndefined();
  });

  it("hands on well-formed answers, with the context validate gets", async () => {
    let seen: Record<string, unknown> = {};
    const tool = { name: "tl", source: "PATH", path: "/usr/bin/tl", version: "1.0" };
    const finding = { subject: "image x", status: "unchecked" as const, detail: "not pulled here" };
    const plugin = definePlugin(base, {
      tools: () => [tool],
      check: (ctx) => {
        seen = { ...ctx };
        return [finding, { subject: "bundle", status: "ok" as const }];
      },
    });
    const { registry, index } = await registryFor(plugin);
    expect(await registry.tools(index, node)).toEqual([tool]);
    const step = stepWith();
    expect(await registry.check(index, { node, step })).toEqual([finding, { subject: "bundle", status: "ok" }]);
    expect(Object.keys(seen).sort()).toEqual(["log", "node", "step"]);
  });

  it.each([
    [
      "tools",
      { tools: (): unknown => [{ name: "x", path: "rel/x", source: "s" }] },
      /tools returned .*; it must return an array of RuntimeTool objects/,
    ],
    ["tools", { tools: (): unknown => "runc" }, /tools returned string runc; it must return an array/],
    [
      "check",
      { check: (): unknown => [{ subject: "x", status: "unchecked" }] },
      /check returned .*; it must return an array of CheckFinding objects/,
    ],
    [
      "check",
      { check: (): unknown => [{ subject: "x", status: "maybe", detail: "?" }] },
      /check returned .*CheckFinding/,
    ],
  ] as const)("a malformed %s answer is ERR_RUNTIME_CONTRACT", async (hook, hooks, message) => {
    const { registry, index } = await registryFor(definePlugin(base, hooks as never));
    const call = hook === "tools" ? registry.tools(index, node) : registry.check(index, { node, step: stepWith() });
    await expect(call).rejects.toMatchObject({ code: "ERR_RUNTIME_CONTRACT", message });
  });

  it("a tools or check that is not a function is refused at load", async () => {
    for (const hook of ["tools", "check"]) {
      const plugin = { ...definePlugin(base, {}), [hook]: "yes" };
      await expect(registryFor(plugin)).rejects.toMatchObject({
        code: "ERR_RUNTIME_INVALID",
        message: new RegExp(`${hook} must be a function when present`),
      });
    }
  });
});
