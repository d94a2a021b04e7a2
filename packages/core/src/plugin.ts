import { type AcceptedField, isAcceptsList } from "./accepts.js";
import type {
  CheckContext,
  CleanupContext,
  DescribeContext,
  InitContext,
  SetupContext,
  TaskHookContext,
  ToolsContext,
  ValidateContext,
} from "./context.js";
import { jobrtError } from "./errors.js";
import { isRuntimeType } from "./names.js";
import type { ExecSpec } from "./types.js";
import { REQUEST_FIELDS } from "./requestoptions.js";

/**
 * Major version of the plugin contract. A plugin built for another major is refused. API 2: one
 * context object per hook, step state from setup, `meta.accepts`, ExecSpec `signals`.
 */
export const RUNTIME_API_VERSION = 2;

/** Index 0 never holds a plugin, so a zeroed index means "unresolved". */
export const RUNTIME_IDX_INVALID = 0;

/** Returned by `run` when the plugin does not start the task itself: the host runs the task's argv. */
export const NOT_SUPPORTED: unique symbol = Symbol.for("jobrt.runtime.NOT_SUPPORTED");
export type NotSupported = typeof NOT_SUPPORTED;

export type MaybePromise<T> = T | Promise<T>;

/** A program a runtime runs on this node, as the runtime finds it (`jobrt runtimes`, `jobrt check`). Since core 2.1.0. */
export interface RuntimeTool {
  /** What the runtime calls it, e.g. "runc". */
  name: string;
  /** Where the runtime takes it from, e.g. "RunTimeRun in /etc/jobrt/oci.conf", "PATH". */
  source: string;
  /** Absolute path, when it was found. */
  path?: string;
  /** What the tool says its version is, when that could be read. */
  version?: string;
  /** Why the runtime cannot use it (missing, not executable): set only for an unusable tool. */
  problem?: string;
}

/** One thing `jobrt check` looked at for a request on this node, and what it found. Since core 2.1.0. */
export interface CheckFinding {
  /** What was looked at, e.g. "bundle /shared/app", "tool runc". */
  subject: string;
  /**
   * "ok": seen from this node and fine; "failed": seen and unusable (`jobrt check` exits 1);
   * "unchecked": cannot be seen from here yet (an image not pulled): `detail` says why.
   */
  status: "ok" | "failed" | "unchecked";
  detail?: string;
}

export interface RuntimeMeta {
  /** Short name, e.g. "oci". */
  name: string;
  /** "runtime/<name>": must match the name the plugin was loaded under. */
  type: string;
  version: string;
  apiVersion: number;
  /**
   * Capability tags shown by `jobrt runtimes`, e.g. "container", "create-start"; free-form but for
   * two the host reads. "pmi-fd": the task process receives the descriptors the host passes it at
   * their own numbers (Slurm's PMI-2 socket under `jobrt exec`, docs/mpi.md). "pass-fds": the host
   * passes them at 3, 4, ... instead, `TaskRecord.passedFds` says how many, and the runtime carries
   * those on into its sandbox at the same numbers (runc's `--preserve-fds`); its run hook refuses
   * with ERR_MPI_WIREUP a configuration that cannot. A runtime with neither is refused such a step.
   * "pmi-fd" and "pass-fds" since @jobrt/core 2.1.0.
   */
  capabilities?: string[];
  /**
   * The container request fields this runtime takes (`value` is `--container`, `options.KEY` one
   * `--container-opt KEY=...`). The host refuses a request setting any other field before a hook
   * sees it. Required, `[]` for none: a container runtime that left it out would type-check and
   * then have every step's `--container` refused (a plugin object built without definePlugin and
   * without it is still loaded, as taking none).
   */
  accepts: readonly AcceptedField[];
}

/**
 * The hooks of API 2. `S` is the plugin's step state: what setup returns (JSON data), handed to
 * every later hook of the step in every process, and to cleanup in `jobrt gc` after a crash.
 */
export interface RuntimeHooks<S = unknown> {
  /**
   * Called once when the registry loads the plugin, before any other hook, with where it is
   * loaded (`submit`, `node`, `step`). It may be called again in another process or registry, so
   * it holds nothing per step. A throw, or not finishing within jobrt.conf `PluginInitTimeout`,
   * is ERR_RUNTIME_INIT and the plugin is not used.
   */
  init(ctx: InitContext): MaybePromise<void>;
  /**
   * Called once when the host is done with the registry, in index order with the other plugins,
   * even when one of them throws; possibly more than once per node, as init. Releases what init
   * took; a throw is reported (ERR_RUNTIME_FINI, naming every failed plugin) after all have run.
   */
  fini(): MaybePromise<void>;
  /**
   * Called once per step record in each process of the step (every `jobrt exec` task under srun),
   * before any task starts, with the validated request (fields outside `meta.accepts` already
   * refused). Checks the request, prepares the step and returns its state: JSON data, journaled
   * and handed to every later hook of the step. Must be idempotent across those processes; a
   * throw (ERR_RUNTIME_HOOK) fails the step before any task runs, and cleanup still follows.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a setup without step state returns nothing
  setup(ctx: SetupContext): MaybePromise<S | undefined | void>;
  /**
   * Always called once at the step's end, also after a failed setup (state undefined), a failed
   * start or a signal, and possibly twice; by `jobrt gc` with `afterCrash` when the host died
   * (the tasks are already SIGKILLed). Removes only what this step made, never throws for
   * leftovers, and leaves nothing of the step running.
   */
  cleanup(ctx: CleanupContext<S>): MaybePromise<void>;
  /**
   * Called per task after setup, concurrently for the tasks of a step, before that task's run:
   * the task's own preparation (files under the step's directory). A throw (ERR_RUNTIME_HOOK)
   * means that task does not start.
   */
  taskInit(ctx: TaskHookContext<S>): MaybePromise<void>;
  /**
   * Called per task after its taskInit: returns the ExecSpec the host spawns itself (in its own
   * process group, as the job user), or NOT_SUPPORTED for the task's own argv. Starts nothing
   * itself; anything else returned is ERR_RUNTIME_CONTRACT.
   */
  run(ctx: TaskHookContext<S>): MaybePromise<ExecSpec | NotSupported>;
  /** Submit-time checks of a request (`jobrt check`), without starting anything. */
  validate?(ctx: ValidateContext): MaybePromise<void>;
  /**
   * What the step runs, for the node log (docs/cli.md, "The node log"): the bundle, the image
   * digest its reference was pinned to. Synchronous and from the state alone: it must not fail or
   * wait, and the host ignores a throw or anything but strings. Since @jobrt/core 2.1.0.
   */
  describe?(ctx: DescribeContext<S>): StepDescription;
  /**
   * The programs this runtime runs on this node, each with its path and version or why it is
   * missing (`jobrt runtimes`). Optional: a runtime that runs no program of its own leaves it out.
   * Since @jobrt/core 2.1.0.
   */
  tools?(ctx: ToolsContext): MaybePromise<RuntimeTool[]>;
  /**
   * What this node can see of a request (`jobrt check`, after `validate`): the container's files,
   * the tools it needs, and what cannot be seen yet. Starts nothing and changes nothing. Optional.
   * Since @jobrt/core 2.1.0.
   */
  check?(ctx: CheckContext): MaybePromise<CheckFinding[]>;
}

export interface RuntimePlugin<S = unknown> extends RuntimeHooks<S> {
  readonly meta: RuntimeMeta;
}

/** What a runtime says a step runs (RuntimeHooks.describe); every field optional. Since core 2.1.0. */
export interface StepDescription {
  /** The bundle directory the container runs, as an absolute path. */
  bundle?: string;
  /** The digest the step's image (`--container-image`) was pinned to (`sha256:<hex>`). */
  digest?: string;
}

export const HOOK_NAMES = ["init", "fini", "setup", "cleanup", "taskInit", "run"] as const;
/** The hooks a plugin may leave out altogether (definePlugin gives no default for them). */
const OPTIONAL_HOOK_NAMES = ["validate", "tools", "check", "describe"] as const;
export type HookName = (typeof HOOK_NAMES)[number] | (typeof OPTIONAL_HOOK_NAMES)[number];

/**
 * Builds a plugin object. Hooks left out do nothing (and `run` answers NOT_SUPPORTED), so a
 * plugin only writes the hooks it needs. `apiVersion` defaults to this core's.
 */
export function definePlugin<S = unknown>(
  meta: Omit<RuntimeMeta, "apiVersion"> & { apiVersion?: number },
  hooks: Partial<RuntimeHooks<S>>,
): RuntimePlugin<S> {
  return Object.freeze({
    meta: Object.freeze({
      ...meta,
      accepts: Object.freeze([...(meta.accepts ?? [])]),
      apiVersion: meta.apiVersion ?? RUNTIME_API_VERSION,
    }),
    init: hooks.init ?? (() => {}),
    fini: hooks.fini ?? (() => {}),
    setup: hooks.setup ?? (() => undefined),
    cleanup: hooks.cleanup ?? (() => {}),
    taskInit: hooks.taskInit ?? (() => {}),
    run: hooks.run ?? (() => NOT_SUPPORTED),
    ...(hooks.validate ? { validate: hooks.validate } : {}),
    ...(hooks.describe ? { describe: hooks.describe } : {}),
    ...(hooks.tools ? { tools: hooks.tools } : {}),
    ...(hooks.check ? { check: hooks.check } : {}),
  });
}

/** Where a loaded plugin came from, for error messages and `jobrt runtimes`. */
export interface PluginOrigin {
  package?: string;
  version?: string;
  path?: string;
}

function describeOrigin(origin: PluginOrigin): string {
  if (!origin.package) return "";
  const at = origin.version ? `@${origin.version}` : "";
  const where = origin.path ? ` (${origin.path})` : "";
  return ` from package ${origin.package}${at}${where}`;
}

/**
 * Checks that a module's default export is a runtime plugin for `expectedType` built for this
 * core's API major. Throws ERR_RUNTIME_INVALID or ERR_RUNTIME_API_VERSION naming what is wrong.
 */
export function assertRuntimePlugin(
  value: unknown,
  expectedType: string,
  origin: PluginOrigin = {},
): asserts value is RuntimePlugin {
  const from = describeOrigin(origin);
  const fail = (what: string): never => {
    throw jobrtError(
      "ERR_RUNTIME_INVALID",
      { runtime: expectedType, origin: from, problem: what },
      {
        details: { runtime: expectedType, ...origin },
      },
    );
  };
  if (typeof value !== "object" || value === null)
    fail(`default export is ${value === null ? "null" : typeof value}, expected a plugin object`);
  const plugin = value as Record<string, unknown>;
  const meta = plugin.meta as Record<string, unknown> | undefined;
  if (typeof meta !== "object" || meta === null) fail("meta is missing");
  const m = meta as Record<string, unknown>;
  if (typeof m.name !== "string" || m.name === "") fail("meta.name must be a non-empty string");
  if (typeof m.version !== "string" || m.version === "") fail("meta.version must be a non-empty string");
  if (typeof m.type !== "string" || !isRuntimeType(m.type))
    fail(`meta.type must look like "runtime/<name>", got ${JSON.stringify(m.type)}`);
  if (m.type !== expectedType)
    fail(`meta.type is ${JSON.stringify(m.type)} but it was loaded as ${JSON.stringify(expectedType)}`);
  if (typeof m.apiVersion !== "number" || !Number.isInteger(m.apiVersion)) fail("meta.apiVersion must be an integer");
  // Before the shape checks of this API: an older plugin is told which API it needs, not what it lacks.
  if (m.apiVersion !== RUNTIME_API_VERSION) {
    throw jobrtError(
      "ERR_RUNTIME_API_VERSION",
      { runtime: expectedType, origin: from, pluginApi: m.apiVersion as number, hostApi: RUNTIME_API_VERSION },
      { details: { runtime: expectedType, ...origin, apiVersion: m.apiVersion, needed: RUNTIME_API_VERSION } },
    );
  }
  if (m.accepts !== undefined && !isAcceptsList(m.accepts)) {
    fail(
      `meta.accepts must list request fields (${REQUEST_FIELDS.join(", ")}, options.KEY), got ${JSON.stringify(m.accepts)?.slice(0, 120)}`,
    );
  }
  if (
    m.capabilities !== undefined &&
    (!Array.isArray(m.capabilities) || !m.capabilities.every((c) => typeof c === "string"))
  ) {
    fail("meta.capabilities must be an array of strings");
  }
  for (const hook of HOOK_NAMES) {
    if (typeof plugin[hook] !== "function") fail(`hook ${hook} is missing (use definePlugin() to get defaults)`);
  }
  for (const hook of OPTIONAL_HOOK_NAMES) {
    if (plugin[hook] !== undefined && typeof plugin[hook] !== "function")
      fail(`${hook} must be a function when present`);
  }
}

function isStringRecord(value: unknown): value is Record<string, string> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  return Object.values(value).every((v) => typeof v === "string");
}

/** True when `value` is a well-formed ExecSpec: non-empty argv of strings, env of strings, cwd. */
export function isExecSpec(value: unknown): value is ExecSpec {
  if (typeof value !== "object" || value === null) return false;
  const spec = value as Record<string, unknown>;
  return (
    Array.isArray(spec.argv) &&
    spec.argv.length > 0 &&
    spec.argv.every((a) => typeof a === "string") &&
    (spec.argv[0] as string).length > 0 &&
    isStringRecord(spec.env) &&
    typeof spec.cwd === "string" &&
    spec.cwd.length > 0 &&
    (spec.shell === undefined || typeof spec.shell === "boolean") &&
    (spec.signals === undefined || spec.signals === "group" || spec.signals === "leader") &&
    (spec.supervise === undefined || isHostSupervision(spec.supervise))
  );
}

/** ExecSpec.supervise: a known stop target, a missing-command check with its view and exit codes. */
function isHostSupervision(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return false;
  const { stop, missingCommand: m } = value as Record<string, unknown>;
  if (stop !== undefined && stop !== "child-group") return false;
  if (m === undefined) return true;
  if (typeof m !== "object" || m === null) return false;
  const c = m as Record<string, unknown>;
  const view = c.view as Record<string, unknown> | null | undefined;
  return (
    isText(c.command, true) &&
    isText(c.cwd) &&
    isOptionalText(c.path) &&
    Array.isArray(c.exitCodes) &&
    c.exitCodes.every((n) => Number.isInteger(n) && n > 0 && n < 256) &&
    typeof view === "object" &&
    view !== null &&
    isText(view.root, true) &&
    Array.isArray(view.mounts) &&
    view.mounts.every(
      (x: unknown) =>
        typeof x === "object" &&
        x !== null &&
        isText((x as Record<string, unknown>).destination) &&
        isOptionalText((x as Record<string, unknown>).source),
    )
  );
}

const isText = (v: unknown, nonEmpty = false): v is string => typeof v === "string" && (!nonEmpty || v !== "");
const isOptionalText = (v: unknown): boolean => v === undefined || typeof v === "string";

/** True when `value` is a well-formed RuntimeTool: name and source, optional absolute path, version, problem. Since core 2.1.0. */
export function isRuntimeTool(value: unknown): value is RuntimeTool {
  if (typeof value !== "object" || value === null) return false;
  const t = value as Record<string, unknown>;
  return (
    isText(t.name, true) &&
    isText(t.source, true) &&
    (t.path === undefined || (isText(t.path) && t.path.startsWith("/"))) &&
    isOptionalText(t.version) &&
    isOptionalText(t.problem)
  );
}

/** True when `value` is a well-formed CheckFinding; an "unchecked" one must say why (`detail`). Since core 2.1.0. */
export function isCheckFinding(value: unknown): value is CheckFinding {
  if (typeof value !== "object" || value === null) return false;
  const f = value as Record<string, unknown>;
  const status = f.status === "ok" || f.status === "failed" || f.status === "unchecked";
  return (
    isText(f.subject, true) &&
    status &&
    isOptionalText(f.detail) &&
    (f.status !== "unchecked" || isText(f.detail, true))
  );
}
