import { checkAccepted } from "./accepts.js";
import { checkDevicesAccepted } from "./deviceaccepts.js";
import type { StepHookContext } from "./context.js";
import { isJobrtError, jobrtError, messageOf } from "./errors.js";
import { type RuntimeName, normalizeRuntimeName } from "./names.js";
import {
  type CheckFinding,
  NOT_SUPPORTED,
  type NotSupported,
  type PluginOrigin,
  RUNTIME_IDX_INVALID,
  type RuntimePlugin,
  type RuntimeTool,
  type StepDescription,
  assertRuntimePlugin,
  isCheckFinding,
  isExecSpec,
  isRuntimeTool,
} from "./plugin.js";
import {
  DEFAULT_RUNTIME,
  type ResolvedRuntime,
  type RuntimeNameResolver,
  type RuntimeResolver,
  registryResolver,
} from "./resolver.js";
import { serializeStepState } from "./stepstate.js";
import type { ClientInfo, ExecSpec, NodeConf, RuntimeContext, StepRecord, TaskRecord } from "./types.js";

/** Give exactly one resolver (docs/architecture.md, "Registry semantics"). */
export interface RuntimeRegistryOptions {
  /** The 2.0.0 contract, `async (type) => plugin` given "runtime/x"; optional since core 2.1.0. */
  resolve?: RuntimeResolver;
  /** `async (name) => ({ plugin, origin })` given the normalised RuntimeName. Since core 2.1.0. */
  resolveRuntime?: RuntimeNameResolver;
  /** The site's DefRuntimePlugin; used for an empty or missing name. Default DEFAULT_RUNTIME. */
  defaultRuntime?: string;
  /** How long a plugin's init may take before the load fails. Default 30 s. */
  initTimeoutMs?: number;
}

export interface LoadedRuntime extends PluginOrigin {
  index: number;
  type: string;
  name: string;
  version: string;
  capabilities: string[];
  /** The runtime's `meta.accepts`: the request fields it applies. Since core 2.1.0. */
  accepts: string[];
}

/** A step as the host hands it to the registry. */
export interface StepCall {
  node: NodeConf;
  step: StepRecord;
}

/**
 * The step state as the host keeps and journals it: the JSON text of what setup returned
 * (undefined: none). Each hook gets its own parsed copy, as a hook in another process would.
 */
export type StepStateText = string | undefined;

export interface StatefulCall extends StepCall {
  state: StepStateText;
}

interface Entry {
  plugin: RuntimePlugin;
  info: LoadedRuntime;
}

/**
 * The indexed registry: one per host process, shared by every component of a (heterogeneous)
 * step. Loading a name returns a small integer; the same name always returns the same index;
 * index 0 never holds a plugin.
 */
export class RuntimeRegistry {
  readonly defaultRuntime: string;
  readonly #resolve: RuntimeNameResolver;
  readonly #initTimeoutMs: number;
  /** Slot i holds index i; slot 0 stays empty for ever. */
  #entries: (Entry | undefined)[] = [undefined];
  #byType = new Map<string, number>();
  #pending = new Map<string, Promise<number>>();
  /** Publication queue: loads publish their index in call order, so indexes follow call order without holes. */
  #publishTail: Promise<void> = Promise.resolve();
  #generation = 0;

  constructor(options: RuntimeRegistryOptions) {
    this.#resolve = registryResolver(options);
    this.defaultRuntime = normalizeRuntimeName(options.defaultRuntime ?? DEFAULT_RUNTIME).name;
    this.#initTimeoutMs = options.initTimeoutMs ?? 30_000;
  }

  /** Loads (once) the runtime called `name` (default when empty) and returns its index, ≥ 1. */
  load(name: string | undefined, context: RuntimeContext = "step"): Promise<number> {
    let runtime: RuntimeName;
    try {
      // The one normalisation of a requested name: the resolver is handed the result.
      runtime = normalizeRuntimeName(name === undefined || name === "" ? this.defaultRuntime : name);
    } catch (error) {
      return Promise.reject(error);
    }
    const type = runtime.type;
    const known = this.#byType.get(type);
    if (known !== undefined) return Promise.resolve(known);
    const pending = this.#pending.get(type);
    if (pending) return pending;

    const prepared = this.#prepare(runtime, context);
    const previous = this.#publishTail;
    const generation = this.#generation;
    const published = (async () => {
      await previous;
      const entry = await prepared;
      if (generation !== this.#generation) {
        await Promise.resolve(entry.plugin.fini()).catch(() => {});
        const problem = "finished loading after the registry was finalised";
        throw jobrtError("ERR_RUNTIME_INIT", { runtime: type, problem }, { details: { runtime: type } });
      }
      const index = this.#entries.length;
      entry.info.index = index;
      this.#entries.push(entry);
      this.#byType.set(type, index);
      return index;
    })();
    this.#publishTail = published.then(
      () => {},
      () => {},
    );
    this.#pending.set(type, published);
    published.then(
      () => this.#pending.delete(type),
      () => this.#pending.delete(type),
    );
    return published;
  }

  async #prepare(runtime: RuntimeName, context: RuntimeContext): Promise<Entry> {
    const { type, name } = runtime;
    let resolved: ResolvedRuntime;
    try {
      resolved = await this.#resolve(runtime);
    } catch (error) {
      if (isJobrtError(error)) throw error;
      const problem = `could not be loaded: ${messageOf(error)}`;
      throw jobrtError(
        "ERR_RUNTIME_NOT_FOUND",
        { runtime: type, problem },
        { cause: error, details: { runtime: type } },
      );
    }
    // A resolver written in JavaScript may return anything: the shape check below says what is wrong.
    const plugin = resolved?.plugin;
    const origin: PluginOrigin = resolved?.origin ?? {};
    assertRuntimePlugin(plugin, type, origin);
    await this.#init(plugin, type, origin, context);
    return {
      plugin,
      info: {
        index: RUNTIME_IDX_INVALID,
        type,
        name,
        version: plugin.meta.version,
        capabilities: [...(plugin.meta.capabilities ?? [])],
        accepts: [...(plugin.meta.accepts ?? [])],
        ...origin,
      },
    };
  }

  /** Errors carry the origin, as the resolver's and the shape check's do: `jobrt runtimes` lists it from them. */
  async #init(plugin: RuntimePlugin, type: string, origin: PluginOrigin, context: RuntimeContext): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    // Not unref()ed: a hung init must still reach its time-out rather than let the process exit.
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            jobrtError(
              "ERR_RUNTIME_INIT",
              { runtime: type, problem: `init did not finish within ${this.#initTimeoutMs} ms` },
              {
                details: { runtime: type, hook: "init", ...origin },
              },
            ),
          ),
        this.#initTimeoutMs,
      );
    });
    try {
      await Promise.race([Promise.resolve().then(() => plugin.init({ context })), timeout]);
    } catch (error) {
      if (isJobrtError(error, "ERR_RUNTIME_INIT")) throw error;
      throw jobrtError(
        "ERR_RUNTIME_INIT",
        { runtime: type, problem: `init failed: ${messageOf(error)}` },
        {
          cause: error,
          details: { runtime: type, hook: "init", ...origin },
        },
      );
    } finally {
      clearTimeout(timer);
    }
  }

  #entry(index: number): Entry {
    const entry = Number.isInteger(index) && index > RUNTIME_IDX_INVALID ? this.#entries[index] : undefined;
    if (!entry) {
      throw jobrtError("ERR_RUNTIME_INDEX", { index: String(index) }, { details: { index } });
    }
    return entry;
  }

  async #call<T>(index: number, hook: string, fn: (plugin: RuntimePlugin) => T | Promise<T>): Promise<T> {
    const { plugin, info } = this.#entry(index);
    try {
      return await fn(plugin);
    } catch (error) {
      throw jobrtError(
        "ERR_RUNTIME_HOOK",
        { runtime: info.type, hook, reason: messageOf(error) },
        {
          cause: error,
          details: { runtime: info.type, hook, ...(isJobrtError(error) ? { causeCode: error.code } : {}) },
        },
      );
    }
  }

  /** The plugin at `index` (throws ERR_RUNTIME_INDEX when there is none). */
  plugin(index: number): RuntimePlugin {
    return this.#entry(index).plugin;
  }

  info(index: number): LoadedRuntime {
    return { ...this.#entry(index).info };
  }

  #context(call: StepCall): StepHookContext {
    return { node: call.node, step: call.step, log: call.node.log };
  }

  /** Refuses, once and in one message, a request field the runtime does not declare in `meta.accepts`. */
  #checkAccepted(index: number, step: StepRecord): void {
    const { info, plugin } = this.#entry(index);
    checkAccepted(info.type, plugin.meta.accepts ?? [], step.container);
    checkDevicesAccepted(info.type, plugin.meta.accepts ?? [], step.container);
  }

  /** Runs setup; resolves with the step state it returned, as JSON text (see StepStateText). */
  async setup(index: number, call: StepCall & { client?: ClientInfo }): Promise<StepStateText> {
    this.#checkAccepted(index, call.step);
    const client = call.client ?? { verbose: 0 };
    const state = await this.#call(index, "setup", (p) => p.setup({ ...this.#context(call), client }));
    return serializeStepState(this.#entry(index).info.type, state);
  }

  cleanup(index: number, call: StatefulCall & { afterCrash?: boolean }): Promise<void> {
    return this.#call(index, "cleanup", (p) =>
      p.cleanup({ ...this.#context(call), state: parseState(call.state), afterCrash: call.afterCrash ?? false }),
    );
  }

  taskInit(index: number, call: StatefulCall & { task: TaskRecord }): Promise<void> {
    return this.#call(index, "taskInit", (p) =>
      p.taskInit({ ...this.#context(call), state: parseState(call.state), task: call.task }),
    );
  }

  /** Submit-context validation; a plugin without `validate` accepts every request it declares. */
  async validate(index: number, call: StepCall): Promise<void> {
    this.#checkAccepted(index, call.step);
    await this.#call(index, "validate", (p) => p.validate?.(this.#context(call)));
  }

  /** The runtime's tools on this node; undefined when the plugin has no `tools` hook. Since core 2.1.0. */
  async tools(index: number, node: NodeConf): Promise<RuntimeTool[] | undefined> {
    const plugin = this.#entry(index).plugin;
    if (!plugin.tools) return undefined;
    const tools = await this.#call(index, "tools", (p) => p.tools?.({ node, log: node.log }));
    return this.#checked(
      index,
      "tools",
      tools,
      isRuntimeTool,
      "RuntimeTool objects {name, source, path?, version?, problem?}",
    );
  }

  /** What this node can see of a request; undefined when the plugin has no `check` hook. Since core 2.1.0. */
  async check(index: number, call: StepCall): Promise<CheckFinding[] | undefined> {
    this.#checkAccepted(index, call.step);
    if (!this.#entry(index).plugin.check) return undefined;
    const findings = await this.#call(index, "check", (p) => p.check?.(this.#context(call)));
    return this.#checked(
      index,
      "check",
      findings,
      isCheckFinding,
      'CheckFinding objects {subject, status: "ok"|"failed"|"unchecked", detail?}',
    );
  }

  #checked<T>(index: number, hook: string, value: unknown, is: (v: unknown) => v is T, what: string): T[] {
    if (Array.isArray(value) && value.every(is)) return value;
    const type = this.#entry(index).info.type;
    throw jobrtError(
      "ERR_RUNTIME_CONTRACT",
      { problem: `runtime ${type} ${hook} returned ${describe(value)}; it must return an array of ${what}` },
      { details: { runtime: type, hook } },
    );
  }

  async run(index: number, call: StatefulCall & { task: TaskRecord }): Promise<ExecSpec | NotSupported> {
    const result = await this.#call(index, "run", (p) =>
      p.run({ ...this.#context(call), state: parseState(call.state), task: call.task }),
    );
    if (result === NOT_SUPPORTED || isExecSpec(result)) return result;
    const type = this.#entry(index).info.type;
    throw jobrtError(
      "ERR_RUNTIME_CONTRACT",
      {
        problem: `runtime ${type} run returned ${describe(result)}; it must return an ExecSpec {argv, env, cwd, shell?, signals?, supervise?} or NOT_SUPPORTED`,
      },
      { details: { runtime: type, hook: "run" } },
    );
  }

  /**
   * What the runtime says the step runs (its optional `describe`), for the node log: only its
   * string fields, each cut to 4096 characters. Never throws: a log line must not fail a step. Since core 2.1.0.
   */
  describe(index: number, state: StepStateText): StepDescription {
    const { plugin } = this.#entry(index);
    let said: unknown;
    try {
      said = plugin.describe?.({ state: parseState(state) });
    } catch {
      return {};
    }
    const out: StepDescription = {};
    if (typeof said !== "object" || said === null) return out;
    for (const key of ["bundle", "digest"] as const) {
      const v = (said as Record<string, unknown>)[key];
      if (typeof v === "string" && v !== "") out[key] = v.slice(0, 4096);
    }
    return out;
  }

  /** Every loaded plugin, in index order. */
  loaded(): LoadedRuntime[] {
    return this.#entries.filter((e): e is Entry => e !== undefined).map((e) => ({ ...e.info }));
  }

  /**
   * Calls every loaded plugin's `fini` once, in index order, even when one throws; empties the
   * registry (a later load starts again at index 1); then throws one error naming all failures.
   */
  async fini(): Promise<void> {
    const entries = this.#entries.filter((e): e is Entry => e !== undefined);
    this.#generation++;
    this.#entries = [undefined];
    this.#byType.clear();
    this.#pending.clear();
    this.#publishTail = Promise.resolve();
    const failures: { type: string; error: unknown }[] = [];
    for (const { plugin, info } of entries) {
      try {
        await plugin.fini();
      } catch (error) {
        failures.push({ type: info.type, error });
      }
    }
    if (failures.length > 0) {
      const list = failures.map((f) => `${f.type}: ${messageOf(f.error)}`).join("; ");
      throw jobrtError(
        "ERR_RUNTIME_FINI",
        { count: failures.length, failures: list },
        {
          cause: failures.length === 1 ? failures[0]?.error : new AggregateError(failures.map((f) => f.error)),
          details: { runtimes: failures.map((f) => f.type) },
        },
      );
    }
  }
}

function parseState(text: StepStateText): unknown {
  return text === undefined ? undefined : JSON.parse(text);
}

function describe(value: unknown): string {
  if (value === undefined) return "undefined";
  if (value === null) return "null";
  if (typeof value === "object") return `an invalid object ${JSON.stringify(value)?.slice(0, 120) ?? ""}`;
  return `${typeof value} ${String(value).slice(0, 60)}`;
}
