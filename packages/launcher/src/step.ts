import { type ChildProcess, type StdioOptions, spawn } from "node:child_process";
import { closeSync, createWriteStream, fstatSync, openSync, readFileSync, statSync, type WriteStream } from "node:fs";
import { constants as osConstants } from "node:os";
import type { Readable, Writable } from "node:stream";
import {
  type ClientInfo,
  type ContainerRequest,
  type ExecSpec,
  JobrtError,
  NOT_SUPPORTED,
  type NodeConf,
  type RuntimeRegistry,
  type StepKind,
  type StepRecord,
  type TaskRecord,
  isJobrtError,
  messageOf,
} from "@jobrt/core";
import type { StepCancel } from "./cancel.js";
import { slurmTaskVariables } from "./env.js";
import { expandFilePattern, isPerTask } from "./filepattern.js";
import { functionSink, pipeLines } from "./lines.js";
import type { UserIdentity } from "./users.js";

/** One component of a (heterogeneous) step, as the user asked for it. */
export interface ComponentSpec {
  argv: string[];
  ntasks: number;
  runtime?: string;
  container?: ContainerRequest;
  cwd: string;
  /** The exported job environment (see exportEnvironment). */
  env: Record<string, string>;
  io: TaskIo;
}

/** srun's -l, -o, -e, -i for one component. */
export interface TaskIo {
  label?: boolean;
  output?: string;
  error?: string;
  /** "all" (default), "none", a task id, or a file pattern. */
  input?: string;
}

export interface StepSpec {
  jobId: number;
  stepId: number;
  kind?: StepKind;
  user: UserIdentity;
  components: ComponentSpec[];
}

/** A component ready to run: its StepRecord (what plugins see) and its stdio choices. */
export interface PlannedComponent {
  record: StepRecord;
  io: TaskIo;
}

export type StepEvent = Record<string, unknown> & { event: string };

export interface RunStepOptions {
  registry: RuntimeRegistry;
  node: NodeConf;
  cancel: StepCancel;
  client?: ClientInfo;
  /** Seconds; on expiry the step is cancelled like Ctrl-C. */
  timeLimit?: number;
  /** Emit JSON events (task output becomes "output" events). */
  json?: boolean;
  onEvent?: (event: StepEvent) => void;
  /** Called once every runtime is resolved, before any setup: the moment to record the step. */
  beforeSetup?: (components: PlannedComponent[]) => void;
  /** One-line error reports (`jobrt: ...`). */
  report: (line: string) => void;
  /** How an error is put into words for `report` (the CLI adds stack traces with -v). */
  describeError?: (error: JobrtError) => string;
  stdout?: Writable;
  stderr?: Writable;
  stdin?: Readable;
}

export interface StepResult {
  status: number;
  /** The first launch, setup or cleanup error, if any. */
  error?: JobrtError;
  taskStatus: number[];
}

/** Builds each component's StepRecord and tasks (global ids run across components). */
export function planStep(spec: StepSpec, node: NodeConf, cpusOnNode: number): PlannedComponent[] {
  const total = spec.components.reduce((n, c) => n + c.ntasks, 0);
  let offset = 0;
  const het = spec.components.length > 1;
  return spec.components.map((c, index) => {
    const record: StepRecord = {
      jobId: spec.jobId,
      stepId: spec.stepId,
      kind: spec.kind ?? "normal",
      runtime: c.runtime ?? "",
      uid: spec.user.uid,
      gid: spec.user.gid,
      user: spec.user.user,
      home: spec.user.home,
      cwd: c.cwd,
      argv: [...c.argv],
      env: { ...c.env },
      tasks: [],
      totalTasks: total,
      nodeId: 0,
      nnodes: 1,
      pty: false,
      ...(het ? { het: { component: index, size: spec.components.length, taskOffset: offset } } : {}),
      ...(c.container ? { container: c.container } : {}),
    };
    for (let i = 0; i < c.ntasks; i++) {
      record.tasks.push({ localId: offset + i, globalId: offset + i, argv: [...c.argv], env: {} });
    }
    offset += c.ntasks;
    for (const task of record.tasks) task.env = taskEnvironment(record, task, node.nodeName, cpusOnNode);
    return { record, io: c.io };
  });
}

/** The job env plus the Slurm task variables plus the user's identity. */
export function taskEnvironment(step: StepRecord, task: TaskRecord, nodeName: string, cpusOnNode: number): Record<string, string> {
  return {
    ...step.env,
    HOME: step.home,
    USER: step.user,
    LOGNAME: step.user,
    ...slurmTaskVariables(step, task, nodeName, cpusOnNode),
  };
}

const SIGNALS = osConstants.signals as Record<string, number>;

/** srun's status for one task: its exit code, or 128+N when killed by signal N. */
export function statusOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  if (signal !== null) return 128 + (SIGNALS[signal] ?? 0);
  return 1;
}

interface RunningTask {
  component: number;
  task: TaskRecord;
  child?: ChildProcess;
  done: Promise<number>;
  /** Settles once the task has a process, or will never have one. */
  spawned: Promise<void>;
  markSpawned: () => void;
}

function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

/** The soft limit on open files (Node raises it to the hard limit at start-up). */
function openFileLimit(): number {
  try {
    const line = readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.split(/\s{2,}/)[1];
    return soft && /^\d+$/.test(soft) ? Number(soft) : Number.POSITIVE_INFINITY;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/**
 * Copying output line by line holds up to three pipe ends per running task. When the step has
 * more tasks than the open-file limit allows, plain output falls back to the tasks writing to
 * jobrt's stdout and stderr directly; options that need the copy (-l, --json, a shared --output
 * file) fail the step with what to do instead of failing tasks with EMFILE half-way.
 */
function checkDescriptorBudget(components: PlannedComponent[], totalTasks: number, options: RunStepOptions, node: NodeConf): boolean {
  if (totalTasks <= 1) return true;
  const limit = openFileLimit();
  const needed = totalTasks * 3 + 64;
  if (needed <= limit) return true;
  const sharedFile = (p: string | undefined) => p !== undefined && !isPerTask(p);
  const needsCopy = options.json || components.some((c) => c.io.label || sharedFile(c.io.output) || sharedFile(c.io.error));
  if (needsCopy) {
    throw new JobrtError(
      "ERR_LAUNCH",
      `${totalTasks} tasks with -l, --json or a shared --output/--error file need about ${needed} open files, but the limit is ${limit}: raise it (ulimit -n), or use per-task files (-o out-%t)`,
    );
  }
  node.log("verbose", `${totalTasks} tasks exceed what the open-file limit (${limit}) allows for line-by-line output: tasks write to jobrt's stdout and stderr directly`);
  return false;
}

let devNullStdin: boolean | undefined;
function stdinIsDevNull(): boolean {
  if (devNullStdin === undefined) {
    try {
      const fd0 = fstatSync(0);
      const nul = statSync("/dev/null");
      devNullStdin = fd0.isCharacterDevice() && fd0.rdev === nul.rdev;
    } catch {
      devNullStdin = false;
    }
  }
  return devNullStdin;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Runs a planned step: load every component's runtime through the one registry, setup each,
 * start every task (taskInit → run → spawn), wait, and always clean up. Never throws: failures
 * become the status and `error`.
 */
export async function runStep(components: PlannedComponent[], options: RunStepOptions): Promise<StepResult> {
  const { registry, node, cancel, report } = options;
  const describe = options.describeError ?? ((e: JobrtError) => e.message);
  const stdout = options.stdout ?? process.stdout;
  const stderr = options.stderr ?? process.stderr;
  const emit = (event: StepEvent) => options.onEvent?.(event);
  const indexes: number[] = [];
  const setupTried: number[] = [];
  const running: RunningTask[] = [];
  const sharedFiles = new Map<string, WriteStream>();
  let firstError: JobrtError | undefined;
  let launchFailed = false;
  /** Set when jobrt itself stops the step because a task could not be launched. */
  let aborting = false;
  const fail = (error: unknown, what: string) => {
    const e = isJobrtError(error) ? error : new JobrtError("ERR_LAUNCH", `${what}: ${messageOf(error)}`, { cause: error });
    firstError ??= e;
    report(describe(e));
    launchFailed = true;
  };

  let killTimer: NodeJS.Timeout | undefined;
  const signalTasks = (signal: NodeJS.Signals) => {
    for (const r of running) killGroup(r.child?.pid, signal);
  };
  /** Signal every task now, and SIGKILL what is left after KillWait. */
  const stopTasks = (signal: NodeJS.Signals) => {
    signalTasks(signal);
    killTimer = setTimeout(() => signalTasks("SIGKILL"), node.killWait * 1000);
    killTimer.unref();
  };
  let resolveCancelled: (value: undefined) => void = () => {};
  /** Settles on the first cancel request: a signal must not wait for a slow plugin init. */
  const cancelled = new Promise<undefined>((resolve) => {
    resolveCancelled = resolve;
  });
  if (cancel.requested) resolveCancelled(undefined);
  const stopListening = cancel.onRequest((signal, count) => {
    resolveCancelled(undefined);
    emit({ event: "cancel", signal, reason: cancel.reason });
    if (count === 1) stopTasks(signal);
    else signalTasks("SIGKILL");
  });
  let timeTimer: NodeJS.Timeout | undefined;
  if (options.timeLimit !== undefined) {
    timeTimer = setTimeout(() => {
      report(`step ${components[0]?.record.jobId}.${components[0]?.record.stepId} cancelled: time limit of ${options.timeLimit} s reached`);
      cancel.request("SIGTERM", "time limit");
    }, options.timeLimit * 1000);
    timeTimer.unref();
  }

  const totalTasks = components.reduce((n, x) => n + x.record.tasks.length, 0);
  /** Whether output can be copied line by line (enough file descriptors for the pipes). */
  let lineMode = true;

  emit({
    event: "step-start",
    jobId: components[0]?.record.jobId,
    stepId: components[0]?.record.stepId,
    components: components.map((c, i) => ({ component: i, runtime: c.record.runtime, ntasks: c.record.tasks.length, argv: c.record.argv })),
  });

  try {
    // Resolve every runtime before any setup, so a bad name fails the step with nothing started.
    for (const [i, c] of components.entries()) {
      // A signal must not wait for a slow or hung plugin init (up to PluginInitTimeout).
      const index = await Promise.race([registry.load(c.record.runtime || undefined, "step"), cancelled]);
      if (index === undefined) break;
      const info = registry.info(index);
      c.record.runtime = info.name;
      for (const task of c.record.tasks) task.env.SLURM_RUNTIME = info.name;
      indexes.push(index);
      node.log("verbose", `component ${i}: runtime ${info.type} (index ${index}) ${info.package ?? ""}@${info.version} ${info.path ?? ""}`);
      emit({ event: "runtime", component: i, index, type: info.type, package: info.package, version: info.version, path: info.path });
    }
    if (indexes.length === components.length) options.beforeSetup?.(components);
    for (const [i, c] of components.entries()) {
      if (cancel.requested || indexes.length < components.length) break;
      setupTried.push(i);
      await registry.setup(indexes[i]!, node, c.record, options.client);
      emit({ event: "setup", component: i, runtime: c.record.runtime });
    }
    if (!cancel.requested && setupTried.length === components.length) {
      lineMode = checkDescriptorBudget(components, totalTasks, options, node);
      for (const [i, c] of components.entries()) {
        for (const task of c.record.tasks) {
          running.push(startTask(i, c, task));
        }
      }
      copyStdinToTasks(options.stdin ?? process.stdin, running);
    }
  } catch (error) {
    if (running.length === 0) fail(error, "launch failed");
  }

  function startTask(componentIndex: number, c: PlannedComponent, task: TaskRecord): RunningTask {
    let markSpawned = () => {};
    const spawned = new Promise<void>((r) => {
      markSpawned = r;
    });
    const entry: RunningTask = { component: componentIndex, task, done: Promise.resolve(0), spawned, markSpawned };
    entry.done = (async () => {
      let spec: ExecSpec;
      try {
        await registry.taskInit(indexes[componentIndex]!, node, c.record, task);
        const result = await registry.run(indexes[componentIndex]!, node, c.record, task);
        spec = result === NOT_SUPPORTED ? { argv: task.argv, env: task.env, cwd: c.record.cwd } : result;
      } catch (error) {
        fail(error, `task ${task.globalId}`);
        cancelOthers();
        return 1;
      }
      if (cancel.requested) return 128 + (SIGNALS[cancel.signal ?? "SIGTERM"] ?? 15);
      if (aborting) return 1;
      if (!isDirectory(spec.cwd)) {
        fail(new JobrtError("ERR_LAUNCH", `task ${task.globalId}: cannot change to directory ${spec.cwd}: no such directory`), "");
        cancelOthers();
        return 1;
      }
      node.log("verbose", `task ${task.globalId}: exec ${JSON.stringify(spec.argv)} in ${spec.cwd}`);
      return spawnTask(componentIndex, c, task, spec, entry);
    })();
    entry.done.finally(markSpawned);
    return entry;
  }

  function cancelOthers(): void {
    if (aborting || cancel.requested) return;
    aborting = true;
    stopTasks("SIGTERM");
  }

  function spawnTask(componentIndex: number, c: PlannedComponent, task: TaskRecord, spec: ExecSpec, entry: RunningTask): Promise<number> {
    const opened: number[] = [];
    const rec = c.record;
    const patternValues = { jobId: rec.jobId, stepId: rec.stepId, taskId: task.globalId, nodeName: node.nodeName, nodeId: rec.nodeId };
    const mustPipe = Boolean(options.json || c.io.label || (totalTasks > 1 && lineMode));
    const stdio: StdioOptions = ["ignore", "inherit", "inherit"];
    const label = (piece: Buffer, atLineStart: boolean) => (c.io.label && atLineStart ? Buffer.concat([Buffer.from(`${task.globalId}: `), piece]) : piece);
    const pipes: Promise<void>[] = [];
    const outputs: { stream: "stdout" | "stderr"; dest: Writable | undefined }[] = [];

    const fileTarget = (pattern: string, option: string): number | Writable => {
      if (isPerTask(pattern)) {
        const fd = openSync(expandFilePattern(pattern, option, patternValues), "w", 0o644);
        opened.push(fd);
        return fd;
      }
      const path = expandFilePattern(pattern, option, { ...patternValues, taskId: undefined });
      let stream = sharedFiles.get(path);
      if (!stream) {
        stream = createWriteStream(path, { flags: "w", mode: 0o644 });
        sharedFiles.set(path, stream);
      }
      return stream;
    };

    try {
      const input = c.io.input ?? "all";
      stdio[0] = "pipe";
      if (input === "none") stdio[0] = "ignore";
      else if (/^\d+$/.test(input)) stdio[0] = Number(input) === task.globalId ? "inherit" : "ignore";
      // Every task reading /dev/null itself is the same as copying its (empty) input to each.
      else if (input === "all") {
        if (totalTasks === 1 || stdinIsDevNull()) stdio[0] = "inherit";
        else if (lineMode) stdio[0] = "pipe";
        // Too few file descriptors to copy stdin to every task: the first task gets it.
        else stdio[0] = task.globalId === 0 ? "inherit" : "ignore";
      }
      else {
        const fd = openSync(expandFilePattern(input, "--input", patternValues), "r");
        opened.push(fd);
        stdio[0] = fd;
      }
      const outTarget = c.io.output !== undefined ? fileTarget(c.io.output, "--output") : undefined;
      const errTarget = c.io.error !== undefined ? fileTarget(c.io.error, "--error") : outTarget;
      for (const [fdIndex, target, stream, fallback] of [
        [1, outTarget, "stdout", stdout],
        [2, errTarget, "stderr", stderr],
      ] as const) {
        if (typeof target === "number") stdio[fdIndex] = target;
        else if (target !== undefined) {
          stdio[fdIndex] = "pipe";
          outputs.push({ stream, dest: target });
        } else if (mustPipe) {
          stdio[fdIndex] = "pipe";
          outputs.push({ stream, dest: options.json ? undefined : fallback });
        } else {
          stdio[fdIndex] = fallback === process.stdout || fallback === process.stderr ? "inherit" : "pipe";
          if (stdio[fdIndex] === "pipe") outputs.push({ stream, dest: fallback });
        }
      }
    } catch (error) {
      for (const fd of opened) closeSync(fd);
      fail(new JobrtError("ERR_LAUNCH", `task ${task.globalId}: ${messageOf(error)}`), "");
      cancelOthers();
      return Promise.resolve(1);
    }

    const asUser = node.hostUid === 0 && (rec.uid !== 0 || rec.gid !== 0);
    return new Promise<number>((resolve) => {
      let child: ChildProcess;
      try {
        child = spawn(spec.argv[0]!, spec.argv.slice(1), {
          cwd: spec.cwd,
          env: spec.env,
          stdio,
          detached: true,
          ...(asUser ? { uid: rec.uid, gid: rec.gid } : {}),
        });
      } catch (error) {
        for (const fd of opened) closeSync(fd);
        fail(new JobrtError("ERR_LAUNCH", `task ${task.globalId}: cannot start ${spec.argv[0]}: ${messageOf(error)}`), "");
        resolve(1);
        return;
      }
      for (const fd of opened) closeSync(fd);
      entry.child = child;
      entry.markSpawned();
      child.on("error", (error: NodeJS.ErrnoException) => {
        // spawn failures (ENOENT, EACCES) arrive here; 'close' still follows.
        const code = error.code === "ENOENT" ? 127 : error.code === "EACCES" ? 126 : 1;
        const why = error.code === "ENOENT" ? "command not found" : error.code === "EACCES" ? "permission denied" : messageOf(error);
        report(`task ${task.globalId}: cannot execute ${spec.argv[0]}: ${why}`);
        emit({ event: "task-exit", task: task.globalId, component: componentIndex, code, signal: null, status: code, error: why });
        resolve(code);
      });
      if (child.pid === undefined) return;
      task.pid = child.pid;
      if (cancel.requested || aborting) killGroup(child.pid, cancel.signal ?? "SIGTERM");
      emit({
        event: "task-start",
        task: task.globalId,
        component: componentIndex,
        pid: child.pid,
        exec: spec.argv === task.argv ? null : spec,
        argv: spec.argv,
      });
      for (const o of outputs) {
        const source = o.stream === "stdout" ? child.stdout : child.stderr;
        if (!source) continue;
        const dest = o.dest;
        if (dest) pipes.push(pipeLines(source, dest, label));
        else {
          // --json: each line becomes an event; the transform drops the newline.
          const sink = functionSink((line) => emit({ event: "output", task: task.globalId, stream: o.stream, data: line.toString() }));
          pipes.push(pipeLines(source, sink, (piece) => (piece.at(-1) === 0x0a ? piece.subarray(0, -1) : piece).toString()));
        }
      }
      child.stdin?.on("error", () => {});
      child.on("exit", () => {
        // Like proctrack at step end: stray processes the task left in its group go too.
        killGroup(child.pid, "SIGKILL");
      });
      child.on("close", async (code, signal) => {
        task.exit = { code, signal };
        await Promise.all(pipes);
        const status = statusOf(code, signal);
        emit({ event: "task-exit", task: task.globalId, component: componentIndex, code, signal, status });
        resolve(status);
      });
    });
  }

  const taskStatus = await Promise.all(running.map((r) => r.done));
  clearTimeout(killTimer);
  clearTimeout(timeTimer);
  stopListening();

  // Cleanup always, in reverse order, for every component whose setup was attempted.
  let cleanupFailed = false;
  for (const i of [...setupTried].reverse()) {
    const c = components[i]!;
    try {
      await registry.cleanup(indexes[i]!, node, c.record);
      emit({ event: "cleanup", component: i, runtime: c.record.runtime, ok: true });
    } catch (error) {
      cleanupFailed = true;
      const e = isJobrtError(error) ? error : new JobrtError("ERR_RUNTIME_HOOK", messageOf(error));
      firstError ??= e;
      report(describe(e));
      emit({ event: "cleanup", component: i, runtime: c.record.runtime, ok: false, error: e.message });
    }
  }
  await Promise.all([...sharedFiles.values()].map((s) => new Promise<void>((r) => s.end(r))));

  let status = taskStatus.reduce((a, b) => Math.max(a, b), 0);
  if (launchFailed || cleanupFailed) status = Math.max(status, 1);
  // A signal to jobrt reports 128+N only when no task ran to report for itself: a task that
  // handles SIGTERM and exits 7 exits 7, as srun and slurmstepd report it.
  if (cancel.signal && running.length === 0) status = Math.max(status, 128 + (SIGNALS[cancel.signal] ?? 15));
  emit({ event: "step-end", status, ...(firstError ? { error: firstError.message, code: firstError.code } : {}) });
  return { status, taskStatus, ...(firstError ? { error: firstError } : {}) };
}

/** srun's default `--input=all` with several tasks: jobrt's stdin is copied to every task that has a pipe. */
function copyStdinToTasks(stdin: Readable, running: RunningTask[]): void {
  void Promise.all(running.map((r) => r.spawned)).then(() => {
    const outs = running.map((r) => r.child?.stdin).filter((s): s is NonNullable<typeof s> => Boolean(s));
    if (outs.length === 0) return;
    const onData = (chunk: Buffer) => {
      for (const o of outs) if (!o.destroyed) o.write(chunk);
    };
    const onEnd = () => {
      for (const o of outs) o.end();
    };
    stdin.on("data", onData);
    stdin.once("end", onEnd);
    stdin.once("error", onEnd);
    stdin.resume();
    void Promise.all(running.map((r) => r.done)).then(() => {
      stdin.off("data", onData);
      stdin.off("end", onEnd);
      stdin.pause();
      // Reading a terminal or pipe keeps the event loop alive; jobrt must exit after the step.
      if (stdin === process.stdin) process.stdin.destroy();
    });
  });
}
