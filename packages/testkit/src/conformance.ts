import { chmodSync, chownSync, existsSync, readdirSync, writeFileSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import {
  type ContainerRequest,
  type ExecSpec,
  HOOK_NAMES,
  NOT_SUPPORTED,
  type NodeConf,
  type NotSupported,
  RUNTIME_API_VERSION,
  type RuntimeContext,
  type RuntimePlugin,
  type StepRecord,
  type TaskRecord,
  assertRuntimePlugin,
  isExecSpec,
} from "@jobrt/core";
import { type TestContext, afterAll, beforeAll, describe, it } from "vitest";
import { CHECKS, type CheckId } from "./checks.js";
import { asJobrtError, describeError } from "./errors.js";
import { argvProblems, containsSequence, envCwdProblems, shellProblems } from "./execspec.js";
import { createTestNode, createTestStep, uniqueJobId } from "./fixtures.js";
import { type PluginHost, pluginHost } from "./host.js";
import { type LaunchResult, launchTask } from "./launch.js";
import type { ConformanceOptions, InvalidCase, Lazy, PluginSource } from "./options.js";
import { processGroupAlive } from "./processes.js";
import { type StepKit, registerCleanupChecks, registerLaunchChecks, registerRequestCheck } from "./stepchecks.js";
import { makeTempDir, removeTree } from "./tempdirs.js";

type RunResult = ExecSpec | NotSupported;

interface StepOutcome {
  step: StepRecord;
  results: RunResult[];
}

const SEMVER = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;

function lazy<T>(value: Lazy<T>): T {
  return typeof value === "function" ? (value as () => T)() : value;
}

async function loadPlugin(source: PluginSource): Promise<RuntimePlugin> {
  const loaded: unknown = typeof source === "function" ? await source() : source;
  // A loader may hand back the module namespace; its default export is the plugin.
  if (typeof loaded === "object" && loaded !== null && !("meta" in loaded) && "default" in loaded) {
    return (loaded as { default: RuntimePlugin }).default;
  }
  return loaded as RuntimePlugin;
}

/** Every path under `dir`, relative, sorted; [] when `dir` does not exist. */
function listTree(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return (readdirSync(dir, { recursive: true }) as string[]).map(String).sort();
}

/** Absolute paths a spec names (argv entries, `--opt=/path` values, cwd) that exist right now. */
function existingPaths(specs: readonly RunResult[]): string[] {
  const out = new Set<string>();
  for (const r of specs) {
    if (r === NOT_SUPPORTED) continue;
    for (const arg of [...r.argv, r.cwd]) {
      for (const p of [arg, arg.slice(arg.indexOf("=") + 1)]) if (isAbsolute(p) && existsSync(p)) out.add(p);
    }
  }
  return [...out];
}

function fail(message: string): never {
  throw new Error(message);
}

/**
 * Registers a vitest suite that checks `plugin` against the jobrt runtime contract. Call it at the
 * top level of a test file (it uses describe/it/beforeAll/afterAll from vitest).
 */
export function describeRuntimeConformance(source: PluginSource, options: ConformanceOptions = {}): void {
  const caps = {
    runs: options.capabilities?.runs ?? "either",
    shell: options.capabilities?.shell ?? false,
    container: options.capabilities?.container ?? "optional",
  } as const;
  const launch = options.launch === false ? undefined : (options.launch ?? {});
  const taskCount = options.tasks ?? 3;
  const timeout = options.timeoutMs ?? 120_000;
  const shownType = options.type ?? (typeof source === "function" ? "plugin" : source.meta?.type);
  const title = options.title ?? `runtime conformance: ${shownType}`;
  const scratch: string[] = [];

  let plugin: RuntimePlugin;
  let driver: PluginHost;
  /** The loaded plugin, driven as the host drives it (accepts, state journaled as JSON). */
  const host = (): PluginHost => driver;

  const check = (id: CheckId, body: (ctx: TestContext) => Promise<void> | void, suffix = ""): void => {
    const { level, title: what } = CHECKS[id];
    const name = `[${level}] ${id}${suffix}: ${what}`;
    const reason = options.skip?.[id];
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
          if (level === "SHOULD" && options.level === "must" && !isSkipSignal(error)) {
            const note = `SHOULD check ${id} failed (level "must" makes it a warning): ${describeError(error)}`;
            console.warn(`@jobrt/testkit: ${note}`);
            await ctx.annotate(note, "warning");
            return;
          }
          throw withFix(id, error);
        }
      },
      timeout,
    );
  };

  const tempDir = (prefix: string): string => {
    const dir = makeTempDir(`jobrt-testkit-${prefix}-`);
    scratch.push(dir);
    // Like a site's: SpoolDir traversable by job users; the job's cwd is the job user's.
    if (prefix === "spool") chmodSync(dir, 0o755);
    if (prefix === "cwd" && options.user && process.getuid?.() === 0) chownSync(dir, options.user.uid, options.user.gid);
    return dir;
  };

  /** A NodeConf whose SpoolDir is fresh unless the author fixed one, so leftovers are per check. */
  const node = (): NodeConf => {
    const given = lazy(options.node) ?? {};
    return createTestNode({ confDir: given.confDir ?? tempDir("conf"), spoolDir: given.spoolDir ?? tempDir("spool"), ...given });
  };

  const fixtureContainer = (): Partial<ContainerRequest> | undefined => lazy(options.container);

  const step = (extra: { jobId?: number; tasks?: number | number[]; totalTasks?: number; argv?: string[]; cwd?: string; env?: Record<string, string>; container?: Partial<ContainerRequest> | null } = {}): StepRecord => {
    const { container, ...rest } = extra;
    const c = container === null ? undefined : (container ?? fixtureContainer());
    return createTestStep({
      runtime: plugin.meta.name,
      ...(options.user ? { user: options.user } : {}),
      tasks: taskCount,
      cwd: tempDir("cwd"),
      ...(launch?.argv ? { argv: launch.argv } : {}),
      ...rest,
      ...(c ? { container: c } : {}),
    });
  };

  const expected = (task: TaskRecord): string => launch?.expect?.(task) ?? `jobrt-testkit:${task.globalId}`;

  /** Calls a hook; a throw becomes an Error naming the hook, the error's code and whether it is a JobrtError. */
  const hook = async <T>(name: string, fn: () => T | Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (error) {
      throw new HookFailure(name, error);
    }
  };

  const setupAndRun = async (n: NodeConf, s: StepRecord): Promise<RunResult[]> => {
    await hook("setup", () => host().setup(n, s, { verbose: 0 }));
    await Promise.all(s.tasks.map((t) => hook("taskInit", () => host().taskInit(n, s, t))));
    return Promise.all(s.tasks.map((t) => hook("run", () => host().run(n, s, t))));
  };

  const cleanup = (n: NodeConf, s: StepRecord): Promise<void> => hook("cleanup", () => host().cleanup(n, s));

  const assertNoLeftovers = (n: NodeConf, before: string[], when: string): void => {
    const after = listTree(n.spoolDir);
    const extra = after.filter((p) => !before.includes(p));
    if (extra.length > 0) fail(`${when}: SpoolDir ${n.spoolDir} still holds ${extra.slice(0, 8).join(", ")}${extra.length > 8 ? ", ..." : ""}`);
  };

  const launchAll = async (s: StepRecord, results: RunResult[]): Promise<LaunchResult[]> =>
    Promise.all(s.tasks.map((t, i) => launchTask(results[i] as RunResult, s, t, { timeoutMs: launch?.timeoutMs ?? 60_000 })));

  const assertLaunched = (s: StepRecord, launched: LaunchResult[]): void => {
    s.tasks.forEach((t, i) => {
      const r = launched[i] as LaunchResult;
      const where = `task ${t.globalId} (${JSON.stringify(r.argv)})`;
      if (r.code !== 0) fail(`${where} exited with ${r.code ?? r.signal}; stderr: ${r.stderr.trim().slice(0, 500)}`);
      if (!r.stdout.includes(expected(t))) {
        fail(`${where} printed ${JSON.stringify(r.stdout.slice(0, 300))}, expected it to contain ${JSON.stringify(expected(t))}`);
      }
    });
  };

  // One full step without launching, shared by the checks that only inspect what run returned.
  // Problems are computed while the step is live, because cleanup may remove what a spec names.
  let baseline: Promise<StepOutcome & { problems: Record<"argv" | "envCwd" | "shell" | "taskArgv", string[]> }> | undefined;
  const getBaseline = () => {
    baseline ??= (async () => {
      const n = node();
      const s = step();
      const results = await setupAndRun(n, s);
      const problems = { argv: [] as string[], envCwd: [] as string[], shell: [] as string[], taskArgv: [] as string[] };
      results.forEach((r, i) => {
        if (r === NOT_SUPPORTED || !isExecSpec(r)) return;
        const t = s.tasks[i] as TaskRecord;
        const at = (p: string) => `task ${t.globalId}: ${p}`;
        problems.argv.push(...argvProblems(r).map(at));
        problems.envCwd.push(...envCwdProblems(r).map(at));
        problems.shell.push(...shellProblems(r, t, caps.shell).map(at));
        if (r.shell !== true && !containsSequence(r.argv, t.argv)) {
          problems.taskArgv.push(at(`argv ${JSON.stringify(r.argv)} does not contain the task argv ${JSON.stringify(t.argv)}`));
        }
      });
      await cleanup(n, s);
      return { step: s, results, problems };
    })();
    return baseline;
  };

  const execSpecs = async (ctx: TestContext) => {
    const b = await getBaseline();
    if (!b.results.some((r) => r !== NOT_SUPPORTED)) ctx.skip("run returned NOT_SUPPORTED for every task: there is no ExecSpec to check");
    return b;
  };

  const kit: StepKit = {
    check: (id, body) => check(id, body),
    node,
    step: (extra) => step(extra),
    tempDir,
    setupAndRun,
    cleanup,
    host,
    hook,
    fixtureContainer,
    get runtimeName() {
      return plugin.meta.name;
    },
    launch,
  };

  describe(title, () => {
    beforeAll(async () => {
      plugin = await loadPlugin(source);
      driver = pluginHost(plugin);
    }, timeout);
    afterAll(() => {
      // A plugin whose cleanup left a mount in its SpoolDir fails here instead of losing the mounted files.
      const left = scratch.splice(0).flatMap(removeTree);
      if (left.length > 0) throw new Error(`@jobrt/testkit: could not remove the conformance run's temp dirs: ${left.join("; ")}`);
    });

    describe("contract", () => {
      check("meta.shape", () => {
        assertRuntimePlugin(plugin, options.type ?? String(plugin?.meta?.type));
        if (plugin.meta.type !== `runtime/${plugin.meta.name}`) fail(`meta.type ${plugin.meta.type} does not match meta.name ${plugin.meta.name}`);
        if (plugin.meta.apiVersion !== RUNTIME_API_VERSION) fail(`meta.apiVersion ${plugin.meta.apiVersion} is not ${RUNTIME_API_VERSION}`);
      });
      check("meta.version", () => {
        if (!SEMVER.test(plugin.meta.version)) fail(`meta.version ${JSON.stringify(plugin.meta.version)} is not a semantic version (use packageVersion(import.meta.url))`);
      });
      check("hooks.present", () => {
        const p = plugin as unknown as Record<string, unknown>;
        const missing = HOOK_NAMES.filter((h) => typeof p[h] !== "function");
        if (missing.length > 0) fail(`hooks missing: ${missing.join(", ")}`);
        if (p.validate !== undefined && typeof p.validate !== "function") fail("validate is present but not a function");
      });
      check("lifecycle.init-fini", async () => {
        for (const context of ["submit", "node", "step"] as RuntimeContext[]) {
          await hook(`init(${context})`, () => plugin.init({ context }));
          await hook(`init(${context}) again`, () => plugin.init({ context }));
          await hook("fini", () => plugin.fini());
          await hook("fini again", () => plugin.fini());
        }
      });
      check("lifecycle.reload", async () => {
        const again = await loadPlugin(source);
        await hook("init", () => again.init({ context: "step" }));
        await hook("fini", () => again.fini());
        await hook("init after fini", () => again.init({ context: "step" }));
        try {
          const n = node();
          const before = listTree(n.spoolDir);
          const s = step({ tasks: 1 });
          await setupAndRun(n, s);
          await cleanup(n, s);
          assertNoLeftovers(n, before, "after a step run by the re-initialised plugin");
        } finally {
          await hook("fini", () => again.fini());
        }
      });
    });

    describe("hooks", () => {
      beforeAll(async () => {
        await plugin.init({ context: "step" });
      }, timeout);
      afterAll(async () => {
        await plugin.fini();
      }, timeout);

      check("step.sequence", async () => {
        const b = await getBaseline();
        if (b.results.length !== b.step.tasks.length) fail(`run answered ${b.results.length} of ${b.step.tasks.length} tasks`);
      });
      check("run.result", async () => {
        const { results } = await getBaseline();
        results.forEach((r, i) => {
          if (r !== NOT_SUPPORTED && !isExecSpec(r)) fail(`task ${i}: run returned ${JSON.stringify(r)?.slice(0, 200)}, not an ExecSpec or NOT_SUPPORTED`);
          if (caps.runs === "exec-spec" && r === NOT_SUPPORTED) fail(`task ${i}: run returned NOT_SUPPORTED, but capabilities.runs is "exec-spec"`);
          if (caps.runs === "not-supported" && r !== NOT_SUPPORTED) fail(`task ${i}: run returned an ExecSpec, but capabilities.runs is "not-supported"`);
        });
      });
      check("execspec.argv", async (ctx) => {
        const { problems } = await execSpecs(ctx);
        if (problems.argv.length > 0) fail(problems.argv.join("; "));
      });
      check("execspec.env-cwd", async (ctx) => {
        const { problems } = await execSpecs(ctx);
        if (problems.envCwd.length > 0) fail(problems.envCwd.join("; "));
      });
      check("execspec.shell", async (ctx) => {
        const { problems } = await execSpecs(ctx);
        if (problems.shell.length > 0) fail(problems.shell.join("; "));
      });
      check("execspec.task-argv", async (ctx) => {
        const { problems } = await execSpecs(ctx);
        if (problems.taskArgv.length > 0) fail(problems.taskArgv.join("; "));
      });

      check("cleanup.without-setup", async () => {
        const n = node();
        const before = listTree(n.spoolDir);
        await cleanup(n, step());
        assertNoLeftovers(n, before, "cleanup without setup");
      });
      check("cleanup.after-failed-start", async () => {
        const n = node();
        const before = listTree(n.spoolDir);
        const s = step();
        await hook("setup", () => host().setup(n, s));
        await cleanup(n, s);
        assertNoLeftovers(n, before, "cleanup after setup only");
      });
      check("cleanup.twice", async () => {
        const n = node();
        const s = step();
        await setupAndRun(n, s);
        await cleanup(n, s);
        await hook("second cleanup", () => host().cleanup(n, s));
      });
      check("cleanup.leftovers", async () => {
        const n = node();
        const before = listTree(n.spoolDir);
        const s = step();
        const results = await setupAndRun(n, s);
        if (launch) await launchAll(s, results);
        await cleanup(n, s);
        assertNoLeftovers(n, before, "after a full step");
      });

      check("state.concurrent-steps", async () => {
        const n = node();
        const before = listTree(n.spoolDir);
        const ja = uniqueJobId();
        const jb = uniqueJobId();
        const a = step({ jobId: ja, env: { JOBRT_TESTKIT_MARK: `jobrt-testkit-mark-a${ja}` } });
        const b = step({ jobId: jb, env: { JOBRT_TESTKIT_MARK: `jobrt-testkit-mark-b${jb}` } });
        await Promise.all([hook("setup(A)", () => host().setup(n, a)), hook("setup(B)", () => host().setup(n, b))]);
        const run = async (s: StepRecord) => {
          await Promise.all(s.tasks.map((t) => hook("taskInit", () => host().taskInit(n, s, t))));
          return Promise.all(s.tasks.map((t) => hook("run", () => host().run(n, s, t))));
        };
        try {
          const ra = await run(a);
          const rbEarly = await run(b);
          const needed = existingPaths(rbEarly);
          await cleanup(n, a);
          const gone = needed.filter((p) => !existsSync(p));
          if (gone.length > 0) fail(`cleanup of step A removed ${gone.join(", ")}, which step B's ExecSpec uses`);
          const leak = (results: RunResult[], other: StepRecord, label: string) => {
            const text = JSON.stringify(results.filter((r) => r !== NOT_SUPPORTED));
            for (const marker of [other.env.JOBRT_TESTKIT_MARK as string, other.cwd]) {
              if (text.includes(marker)) fail(`step ${label}'s ExecSpec mentions ${marker}, which belongs to the other step`);
            }
          };
          leak(ra, b, "A");
          leak(rbEarly, a, "B");
          if (launch) assertLaunched(b, await launchAll(b, rbEarly));
        } finally {
          await cleanup(n, a);
          await cleanup(n, b);
        }
        assertNoLeftovers(n, before, "after two concurrent steps");
      });

      check("state.split-step", async () => {
        const n = node();
        const before = listTree(n.spoolDir);
        const jobId = uniqueJobId();
        const cwd = tempDir("cwd");
        const r0 = step({ jobId, tasks: [0], totalTasks: 2, cwd });
        const r1 = step({ jobId, tasks: [1], totalTasks: 2, cwd });
        try {
          const [res0, res1] = await Promise.all([setupAndRun(n, r0), setupAndRun(n, r1)]);
          if (launch) assertLaunched(r0, await launchAll(r0, res0));
          const needed = existingPaths(res1);
          await cleanup(n, r0);
          const gone = needed.filter((p) => !existsSync(p));
          if (gone.length > 0) fail(`cleanup of task 0's record removed ${gone.join(", ")}, which task 1's ExecSpec uses`);
          if (launch) assertLaunched(r1, await launchAll(r1, res1));
        } finally {
          await cleanup(n, r0);
          await cleanup(n, r1);
        }
        assertNoLeftovers(n, before, "after both records of the split step");
      });

      registerRequestCheck(kit);
      registerCleanupChecks(kit);

      const invalid: InvalidCase[] = options.invalid ?? [];
      const failWith = async (c: InvalidCase) => {
        const n = node();
        const before = listTree(n.spoolDir);
        const s = step({ container: { ...(fixtureContainer() ?? {}), ...lazy(c.container) } });
        c.step?.(s);
        let thrown: HookFailure | undefined;
        try {
          await setupAndRun(n, s);
        } catch (error) {
          if (!(error instanceof HookFailure)) throw error;
          thrown = error;
        }
        return { n, s, before, thrown };
      };
      if (invalid.length === 0) {
        check("errors.invalid", (ctx) => ctx.skip("no invalid requests declared (options.invalid)"));
      }
      for (const c of invalid) {
        check(
          "errors.invalid",
          async () => {
            const { n, s, thrown } = await failWith(c);
            await cleanup(n, s).catch(() => {});
            if (!thrown) fail(`the request was accepted: setup, taskInit and run all succeeded`);
            const codes = typeof c.code === "string" ? [c.code] : c.code;
            const err = asJobrtError(thrown.cause);
            if (!err) fail(`${thrown.hook} threw ${describeError(thrown.cause)}, not a JobrtError`);
            if (!codes.includes(err.code as never)) fail(`${thrown.hook} threw ${err.code} (${err.message}), expected ${codes.join(" or ")}`);
          },
          ` (${c.title})`,
        );
      }
      check("errors.cleanup-after-failure", async () => {
        // Generic failure: SpoolDir is a regular file, so a plugin that uses it cannot set up.
        const spoolFile = join(tempDir("spoolfile"), "not-a-dir");
        writeFileSync(spoolFile, "");
        const broken = { ...node(), spoolDir: spoolFile };
        const s = step();
        try {
          await setupAndRun(broken, s);
        } catch (error) {
          if (!(error instanceof HookFailure)) throw error;
        }
        await cleanup(broken, s);
        for (const c of invalid) {
          const { n: n2, s: s2, before } = await failWith(c);
          await hook(`cleanup after "${c.title}"`, () => host().cleanup(n2, s2));
          assertNoLeftovers(n2, before, `after the failed request "${c.title}"`);
        }
      });
      check("errors.message", async (ctx) => {
        if (invalid.length === 0) ctx.skip("no invalid requests declared (options.invalid)");
        for (const c of invalid) {
          const { n, s, thrown } = await failWith(c);
          await cleanup(n, s).catch(() => {});
          const err = asJobrtError(thrown?.cause);
          if (!err) continue;
          if (err.message.trim() === "" || err.message.includes("\n")) fail(`"${c.title}": message ${JSON.stringify(err.message)} is not one non-empty line`);
        }
      });
      if (caps.container === "required") {
        check("errors.container-required", async () => {
          const n = node();
          const s = step({ container: null });
          let thrown: HookFailure | undefined;
          try {
            await setupAndRun(n, s);
          } catch (error) {
            if (!(error instanceof HookFailure)) throw error;
            thrown = error;
          } finally {
            await cleanup(n, s).catch(() => {});
          }
          if (!thrown) fail("a step without --container was accepted");
          const err = asJobrtError(thrown.cause);
          if (!err?.code.startsWith("ERR_CONTAINER")) fail(`${thrown.hook} threw ${describeError(thrown.cause)}, expected an ERR_CONTAINER_* JobrtError`);
        });
      } else {
        check("errors.container-required", (ctx) => ctx.skip('not applicable: capabilities.container is "optional"'));
      }
      check("validate.accepts", async (ctx) => {
        if (typeof plugin.validate !== "function") ctx.skip("the plugin has no validate hook");
        const n = node();
        const before = listTree(n.spoolDir);
        await hook("validate", () => host().validate(n, step()));
        assertNoLeftovers(n, before, "validate");
      });

      if (!launch) {
        for (const id of ["launch.tasks", "launch.exit-code", "launch.no-leftover-processes"] as const) {
          check(id, (ctx) => ctx.skip("real-launch checks turned off (launch: false)"));
        }
      } else {
        check("launch.tasks", async () => {
          const n = node();
          const s = step();
          try {
            assertLaunched(s, await launchAll(s, await setupAndRun(n, s)));
          } finally {
            await cleanup(n, s);
          }
        });
        check("launch.exit-code", async () => {
          const n = node();
          const s = step({ tasks: 1, argv: ["sh", "-c", "exit 7"] });
          try {
            const [r] = await launchAll(s, await setupAndRun(n, s));
            if (r?.code !== 7) fail(`task exited with ${r?.code ?? r?.signal}, expected 7; stderr: ${r?.stderr.trim().slice(0, 300)}`);
          } finally {
            await cleanup(n, s);
          }
        });
        check("launch.no-leftover-processes", async () => {
          const n = node();
          const s = step({ tasks: 1 });
          try {
            assertLaunched(s, await launchAll(s, await setupAndRun(n, s)));
          } finally {
            await cleanup(n, s);
          }
          const pid = s.tasks[0]?.pid;
          if (pid === undefined) fail("the task has no pid after launch");
          if (processGroupAlive(pid)) fail(`process group ${pid} still has processes after cleanup`);
        });
      }
      registerLaunchChecks(kit);
    });
  });
}

class HookFailure extends Error {
  readonly hook: string;
  override readonly cause: unknown;
  constructor(hook: string, cause: unknown) {
    super(`${hook} threw ${describeError(cause)}`);
    this.hook = hook;
    this.cause = cause;
  }
}

/** The failure with what to do about it and where the check is described (a file the package ships). */
function withFix(id: CheckId, error: unknown): unknown {
  if (isSkipSignal(error) || !(error instanceof Error)) return error;
  const fixed = new Error(`${error.message}\n  what to do: ${CHECKS[id].fix}\n  check ${id} is described in node_modules/@jobrt/testkit/README.md (Checks)`, { cause: error });
  fixed.stack = `${fixed.message}\n${error.stack?.split("\n").slice(1).join("\n") ?? ""}`;
  return fixed;
}

/** vitest's ctx.skip() throws a PendingError; that must not be turned into a SHOULD warning. */
function isSkipSignal(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === "VITEST_PENDING";
}
