/**
 * A minimal host for tests: drives the plugin's hooks the way the launcher does (setup once,
 * taskInit + run per task concurrently, spawn the ExecSpec in its own process group, cleanup
 * always) with real processes. Used until/besides the CLI end-to-end tests.
 */
import {
  type ContainerRequest,
  type ExecSpec,
  NOT_SUPPORTED,
  type NodeConf,
  type RuntimePlugin,
  type StepRecord,
  type TaskRecord,
} from "@jobrt/core";
import { type TaskEnd, type TaskGroup, type TaskProcess, type TaskStart, createTaskGroup } from "@jobrt/launcher";
import { pluginHost } from "@jobrt/testkit";
import { afterAll, expect } from "vitest";
import { tempDir as fileTempDir } from "../../../tests/helpers/tmp.js";
import { runcIds } from "./fixtures.js";

export interface HostOptions {
  confDir: string;
  spoolDir: string;
  jobId?: number;
  stepId?: number;
  ntasks?: number;
  /** Node-local ids of the tasks this host runs (default 0..ntasks-1): srun runs one jobrt per task. */
  taskIds?: number[];
  argv: string[];
  container?: Partial<ContainerRequest>;
  uid?: number;
  gid?: number;
  user?: string;
  cwd?: string;
  env?: Record<string, string>;
  killWait?: number;
  /** Send this signal to every task's process group after `signalAfterMs`. */
  signal?: NodeJS.Signals;
  signalAfterMs?: number;
  /** Send `signal` once this holds (polled; given the task's output so far) instead of after a delay. */
  signalWhen?: (output: { stdout: string; stderr: string }) => boolean;
  pty?: boolean;
  logs?: string[];
  /** Signal only the task's own process, not its group (a host that lost track of its tasks). */
  killOnlyLeader?: boolean;
  /** Called with each task's ExecSpec after its run hook, right before it is spawned. */
  beforeSpawn?: (spec: ExecSpec | typeof NOT_SUPPORTED) => void;
  /** Called after every task ended, right before cleanup. */
  beforeCleanup?: () => void;
}

export interface TaskOutcome {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  spec: ExecSpec | typeof NOT_SUPPORTED;
  /** From spawn to the task process's exit, in ms. */
  durationMs: number;
}

export interface HostResult {
  tasks: TaskOutcome[];
  step: StepRecord;
  setupError?: unknown;
  cleanupError?: unknown;
}

let counter = 0;
export function uniqueJobId(): number {
  return 700000 + ((process.pid * 100 + counter++) % 200000);
}

/** A temp dir removed when the test file ends (tests/helpers/tmp.ts). */
export function tempDir(prefix = "oci-test-"): string {
  return fileTempDir(prefix);
}

export function makeNode(o: Pick<HostOptions, "confDir" | "spoolDir" | "killWait" | "logs">): NodeConf {
  return {
    nodeName: "testnode",
    confDir: o.confDir,
    spoolDir: o.spoolDir,
    killWait: o.killWait ?? 2,
    hostUid: process.getuid?.() ?? 0,
    log: (level, msg) => o.logs?.push(`${level}: ${msg}`),
  };
}

export function makeStep(o: HostOptions): StepRecord {
  const ids = o.taskIds ?? Array.from({ length: o.ntasks ?? 1 }, (_, i) => i);
  const n = o.ntasks ?? ids.length;
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", ...(o.env ?? {}) };
  const jobId = o.jobId ?? uniqueJobId();
  const tasks: TaskRecord[] = ids.map((i) => ({
    localId: i,
    globalId: i,
    argv: [...o.argv],
    env: { ...env, SLURM_JOB_ID: String(jobId), SLURM_PROCID: String(i), SLURM_LOCALID: String(i) },
  }));
  return {
    jobId,
    stepId: o.stepId ?? 0,
    kind: "normal",
    runtime: "oci",
    uid: o.uid ?? process.getuid?.() ?? 0,
    gid: o.gid ?? process.getgid?.() ?? 0,
    user: o.user ?? "root",
    home: "/root",
    cwd: o.cwd ?? "/",
    argv: [...o.argv],
    env,
    tasks,
    totalTasks: n,
    nodeId: 0,
    nnodes: 1,
    pty: o.pty ?? false,
    ...(o.container
      ? { container: { volumes: [], modules: [], env: [], clearEnv: false, options: {}, ...o.container } }
      : {}),
  };
}

function spawnTask(
  step: StepRecord,
  task: TaskRecord,
  spec: ExecSpec | typeof NOT_SUPPORTED,
  o: HostOptions,
  tasks: TaskGroup,
): Promise<TaskOutcome> {
  const exec: ExecSpec = spec === NOT_SUPPORTED ? { argv: task.argv, env: task.env, cwd: step.cwd } : spec;
  // The launcher's own spawn path: process group, cgroup, uid drop, as `jobrt run` starts tasks.
  const start: TaskStart = { taskId: task.globalId, uid: step.uid, gid: step.gid, stdio: ["ignore", "pipe", "pipe"] };
  // Its status as a step session decides it (ExecSpec.supervise), with its line on the task's stderr.
  return tasks.start(exec, start).then((child) => waitTask(child, task, spec, o, () => tasks.end(exec, start, child)));
}

function waitTask(
  child: TaskProcess,
  task: TaskRecord,
  spec: ExecSpec | typeof NOT_SUPPORTED,
  o: HostOptions,
  decide: () => TaskEnd,
): Promise<TaskOutcome> {
  return new Promise((resolve, reject) => {
    task.pid = child.pid;
    const started = performance.now();
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr?.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    let killTimer: NodeJS.Timeout | undefined;
    let sigTimer: NodeJS.Timeout | undefined;
    const signalNow = () => {
      try {
        process.kill(o.killOnlyLeader ? (child.pid as number) : -(child.pid as number), o.signal as NodeJS.Signals);
      } catch {}
      killTimer = setTimeout(
        () => {
          try {
            process.kill(-(child.pid as number), "SIGKILL");
          } catch {}
        },
        (o.killWait ?? 2) * 1000,
      );
    };
    // An event, not a delay, where the test can name one: a loaded machine stretches every delay.
    const poll = () => {
      sigTimer = o.signalWhen?.({ stdout, stderr }) ? undefined : setTimeout(poll, 20);
      if (!sigTimer) signalNow();
    };
    if (o.signal) sigTimer = o.signalWhen ? setTimeout(poll, 20) : setTimeout(signalNow, o.signalAfterMs ?? 1000);
    child.on("error", reject);
    child.on("exit", (_code, signal) => {
      const durationMs = performance.now() - started;
      clearTimeout(sigTimer);
      clearTimeout(killTimer);
      const end = decide();
      // Output written by processes that outlive the task (they should not) is not awaited.
      setTimeout(() => {
        if (end.message) stderr += `${end.message}\n`;
        resolve({ code: end.code, signal, stdout, stderr, spec, durationMs });
      }, 20);
    });
  });
}

/** Runs one step through the plugin with real processes and returns each task's outcome. */
export async function runStep(plugin: RuntimePlugin, o: HostOptions): Promise<HostResult> {
  const node = makeNode(o);
  const step = makeStep(o);
  const result: HostResult = { tasks: [], step };
  const tasks = createTaskGroup(`oci-test.${process.pid}.${counter++}`);
  const host = pluginHost(plugin);
  try {
    await host.setup(node, step);
    result.tasks = await Promise.all(
      step.tasks.map(async (task) => {
        await host.taskInit(node, step, task);
        const spec = await host.run(node, step, task);
        o.beforeSpawn?.(spec);
        return spawnTask(step, task, spec, o, tasks);
      }),
    );
  } catch (error) {
    result.setupError = error;
  } finally {
    tasks.killAll();
    await tasks.close(5000);
    o.beforeCleanup?.();
    try {
      await host.cleanup(node, step);
    } catch (error) {
      result.cleanupError = error;
    }
  }
  return result;
}

/**
 * Job ids for one describe block; after the block, none of their containers may remain in runc's
 * machine-wide state.
 */
export function trackedJobs(): () => number {
  const jobs: number[] = [];
  afterAll(() => {
    expect(runcIds().filter((id) => jobs.some((j) => id.includes(`.${j}.`)))).toEqual([]);
  });
  return () => {
    const j = uniqueJobId();
    jobs.push(j);
    return j;
  };
}
