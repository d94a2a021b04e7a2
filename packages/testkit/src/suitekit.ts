import { chmodSync, chownSync, existsSync, readdirSync } from "node:fs";
import {
  type ContainerRequest,
  type ExecSpec,
  NOT_SUPPORTED,
  type NodeConf,
  type NotSupported,
  type RuntimePlugin,
  type StepRecord,
  type TaskRecord,
  isExecSpec,
} from "@jobrt/core";
import { type TestContext, it } from "vitest";
import { CHECKS, type CheckId } from "./checks.js";
import { describeThrown } from "./errors.js";
import { argvProblems, containsSequence, envCwdProblems, shellProblems } from "./execspec.js";
import { createTestNode, createTestStep } from "./fixtures.js";
import { type PluginHost, pluginHost } from "./host.js";
import { type LaunchResult, launchTask } from "./launch.js";
import type { ConformanceOptions, LaunchCheckOptions, Lazy, PluginSource } from "./options.js";
import type { StepExtra, StepKit } from "./stepchecks.js";
import { makeTempDir, removeTempDir } from "./tempdirs.js";

export type RunResult = ExecSpec | NotSupported;

/** One full step without launching, shared by the checks that only inspect what run returned. */
export interface Baseline {
  step: StepRecord;
  results: RunResult[];
  /** Computed while the step is live: cleanup may remove what a spec names. */
  problems: Record<"argv" | "envCwd" | "shell" | "taskArgv", string[]>;
}

export function fail(message: string): never {
  throw new Error(message);
}

export function lazy<T>(value: Lazy<T>): T {
  return typeof value === "function" ? (value as () => T)() : value;
}

export async function loadPlugin(source: PluginSource): Promise<RuntimePlugin> {
  const loaded: unknown = typeof source === "function" ? await source() : source;
  // A loader may hand back the module namespace; its default export is the plugin.
  if (typeof loaded === "object" && loaded !== null && !("meta" in loaded) && "default" in loaded) {
    return (loaded as { default: RuntimePlugin }).default;
  }
  return loaded as RuntimePlugin;
}

/** Every path under `dir`, relative, sorted; [] when `dir` does not exist. */
export function listTree(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return (readdirSync(dir, { recursive: true }) as string[]).map(String).sort();
}

/** A hook that threw: which hook, and what it threw. */
export class HookFailure extends Error {
  readonly hook: string;
  override readonly cause: unknown;
  constructor(hook: string, cause: unknown) {
    super(`${hook} threw ${describeThrown(cause)}`);
    this.hook = hook;
    this.cause = cause;
  }
}

/** The failure with what to do about it and where the check is described (a file the package ships). */
function withFix(id: CheckId, error: unknown): unknown {
  if (isSkipSignal(error) || !(error instanceof Error)) return error;
  const fixed = new Error(
    `${error.message}\n  what to do: ${CHECKS[id].fix}\n  check ${id} is described in node_modules/@jobrt/testkit/README.md (Checks)`,
    { cause: error },
  );
  fixed.stack = `${fixed.message}\n${error.stack?.split("\n").slice(1).join("\n") ?? ""}`;
  return fixed;
}

/** vitest's ctx.skip() throws a PendingError; that must not be turned into a SHOULD warning. */
function isSkipSignal(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === "VITEST_PENDING";
}

/**
 * The fixtures and hook calls every check of one conformance suite shares (what the closures of
 * describeRuntimeConformance were): the plugin under test, fresh nodes and steps with their temp
 * dirs, the hooks called as the host calls them, and the one baseline step.
 */
export class SuiteKit implements StepKit {
  readonly caps: { runs: "exec-spec" | "not-supported" | "either"; shell: boolean; container: "required" | "optional" };
  readonly launch: LaunchCheckOptions | undefined;
  readonly timeout: number;
  readonly #scratch: string[] = [];
  #plugin: RuntimePlugin | undefined;
  #driver: PluginHost | undefined;
  #baseline: Promise<Baseline> | undefined;

  constructor(
    readonly source: PluginSource,
    readonly options: ConformanceOptions,
  ) {
    this.caps = {
      runs: options.capabilities?.runs ?? "either",
      shell: options.capabilities?.shell ?? false,
      container: options.capabilities?.container ?? "optional",
    };
    this.launch = options.launch === false ? undefined : (options.launch ?? {});
    this.timeout = options.timeoutMs ?? 120_000;
  }

  /** Loads the plugin (in the suite's beforeAll). */
  async load(): Promise<void> {
    this.#plugin = await loadPlugin(this.source);
    this.#driver = pluginHost(this.#plugin);
  }

  get plugin(): RuntimePlugin {
    return this.#plugin as RuntimePlugin;
  }

  get runtimeName(): string {
    return this.plugin.meta.name;
  }

  /** The loaded plugin, driven as the host drives it (accepts, state journaled as JSON). */
  host(): PluginHost {
    return this.#driver as PluginHost;
  }

  /** Registers check `id` (skipped when the author said so; a SHOULD only warns at level "must"). */
  check(id: CheckId, body: (ctx: TestContext) => Promise<void> | void, suffix = ""): void {
    const { level, title: what } = CHECKS[id];
    const name = `[${level}] ${id}${suffix}: ${what}`;
    const reason = this.options.skip?.[id];
    if (reason !== undefined) {
      it.skip(`${name} (skipped: ${reason})`, () => {});
      return;
    }
    it(
      name,
      async (ctx) => {
        try {
          await body(ctx);
        } catch (error) {
          if (level === "SHOULD" && this.options.level === "must" && !isSkipSignal(error)) {
            const note = `SHOULD check ${id} failed (level "must" makes it a warning): ${describeThrown(error)}`;
            console.warn(`@jobrt/testkit: ${note}`);
            await ctx.annotate(note, "warning");
            return;
          }
          throw withFix(id, error);
        }
      },
      this.timeout,
    );
  }

  tempDir(prefix: string): string {
    const dir = makeTempDir(`jobrt-testkit-${prefix}-`);
    this.#scratch.push(dir);
    // Like a site's: SpoolDir traversable by job users; the job's cwd is the job user's.
    if (prefix === "spool") chmodSync(dir, 0o755);
    const user = this.options.user;
    if (prefix === "cwd" && user && process.getuid?.() === 0) chownSync(dir, user.uid, user.gid);
    return dir;
  }

  /** Removes every temp dir the suite made; what could not be removed (a mount left behind). */
  removeScratch(): string[] {
    return this.#scratch.splice(0).flatMap(removeTempDir);
  }

  /** A NodeConf whose SpoolDir is fresh unless the author fixed one, so leftovers are per check. */
  node(): NodeConf {
    const given = lazy(this.options.node) ?? {};
    return createTestNode({
      confDir: given.confDir ?? this.tempDir("conf"),
      spoolDir: given.spoolDir ?? this.tempDir("spool"),
      ...given,
    });
  }

  fixtureContainer(): Partial<ContainerRequest> | undefined {
    return lazy(this.options.container);
  }

  step(extra: StepExtra & { totalTasks?: number } = {}): StepRecord {
    const { container, ...rest } = extra;
    const c = container === null ? undefined : (container ?? this.fixtureContainer());
    return createTestStep({
      runtime: this.plugin.meta.name,
      ...(this.options.user ? { user: this.options.user } : {}),
      tasks: this.options.tasks ?? 3,
      cwd: this.tempDir("cwd"),
      ...(this.launch?.argv ? { argv: this.launch.argv } : {}),
      ...rest,
      ...(c ? { container: c } : {}),
    });
  }

  /** Calls a hook; a throw becomes an Error naming the hook, the error's code and whether it is a JobrtError. */
  async hook<T>(name: string, fn: () => T | Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      throw new HookFailure(name, error);
    }
  }

  async setupAndRun(n: NodeConf, s: StepRecord): Promise<RunResult[]> {
    await this.hook("setup", () => this.host().setup(n, s, { verbose: 0 }));
    await Promise.all(s.tasks.map((t) => this.hook("taskInit", () => this.host().taskInit(n, s, t))));
    return Promise.all(s.tasks.map((t) => this.hook("run", () => this.host().run(n, s, t))));
  }

  cleanup(n: NodeConf, s: StepRecord): Promise<void> {
    return this.hook("cleanup", () => this.host().cleanup(n, s));
  }

  assertNoLeftovers(n: NodeConf, before: string[], when: string): void {
    const extra = listTree(n.spoolDir).filter((p) => !before.includes(p));
    if (extra.length > 0)
      fail(
        `${when}: SpoolDir ${n.spoolDir} still holds ${extra.slice(0, 8).join(", ")}${extra.length > 8 ? ", ..." : ""}`,
      );
  }

  launchAll(s: StepRecord, results: RunResult[]): Promise<LaunchResult[]> {
    return Promise.all(
      s.tasks.map((t, i) => launchTask(results[i] as RunResult, s, t, { timeoutMs: this.launch?.timeoutMs ?? 60_000 })),
    );
  }

  #expected(task: TaskRecord): string {
    return this.launch?.expect?.(task) ?? `jobrt-testkit:${task.globalId}`;
  }

  assertLaunched(s: StepRecord, launched: LaunchResult[]): void {
    s.tasks.forEach((t, i) => {
      const r = launched[i] as LaunchResult;
      const where = `task ${t.globalId} (${JSON.stringify(r.argv)})`;
      if (r.code !== 0) fail(`${where} exited with ${r.code ?? r.signal}; stderr: ${r.stderr.trim().slice(0, 500)}`);
      if (!r.stdout.includes(this.#expected(t))) {
        fail(
          `${where} printed ${JSON.stringify(r.stdout.slice(0, 300))}, expected it to contain ${JSON.stringify(this.#expected(t))}`,
        );
      }
    });
  }

  /** The one full step (without launching) that the result and ExecSpec checks inspect; run once. */
  baseline(): Promise<Baseline> {
    this.#baseline ??= this.#runBaseline();
    return this.#baseline;
  }

  async #runBaseline(): Promise<Baseline> {
    const n = this.node();
    const s = this.step();
    const results = await this.setupAndRun(n, s);
    const problems: Baseline["problems"] = { argv: [], envCwd: [], shell: [], taskArgv: [] };
    results.forEach((r, i) => {
      if (r === NOT_SUPPORTED || !isExecSpec(r)) return;
      const t = s.tasks[i] as TaskRecord;
      const at = (p: string) => `task ${t.globalId}: ${p}`;
      problems.argv.push(...argvProblems(r).map(at));
      problems.envCwd.push(...envCwdProblems(r).map(at));
      problems.shell.push(...shellProblems(r, t, this.caps.shell).map(at));
      if (r.shell !== true && !containsSequence(r.argv, t.argv)) {
        problems.taskArgv.push(
          at(`argv ${JSON.stringify(r.argv)} does not contain the task argv ${JSON.stringify(t.argv)}`),
        );
      }
    });
    await this.cleanup(n, s);
    return { step: s, results, problems };
  }

  /** The baseline, or a skip when run returned NOT_SUPPORTED for every task. */
  async execSpecs(ctx: TestContext): Promise<Baseline> {
    const b = await this.baseline();
    if (!b.results.some((r) => r !== NOT_SUPPORTED))
      ctx.skip("run returned NOT_SUPPORTED for every task: there is no ExecSpec to check");
    return b;
  }
}
