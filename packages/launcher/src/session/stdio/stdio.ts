import { closeSync, createWriteStream, fstatSync, statSync, type WriteStream } from "node:fs";
import type { Readable, Writable } from "node:stream";
import { type TaskRecord, jobrtError } from "@jobrt/core";
import { expandFilePattern, isPerTask } from "../../filepattern.js";
import { functionSink, pipeLines } from "../../lines.js";
import type { PlannedComponent } from "../plan.js";
import type { StdioItem, TaskProcess } from "../forker/forker.js";
import type { FileUser } from "@jobrt/host-services";
import { fileError, openInput, openOutput } from "./userfiles.js";

/** Where a task's output goes when it is copied: a stream, or `--json` output events. */
interface OutputRoute {
  stream: "stdout" | "stderr";
  dest: Writable | undefined;
}

/** One task's stdio, decided and opened before any task starts. */
export interface TaskStdio {
  stdio: StdioItem[];
  routes: OutputRoute[];
  /** Descriptors handed to the task; closed in jobrt once it has them. */
  fds: number[];
}

export interface StdioContext {
  json: boolean;
  /** Whether output can be copied line by line (enough descriptors). */
  lineMode: boolean;
  totalTasks: number;
  nodeName: string;
  user: FileUser | undefined;
  stdout: Writable;
  stderr: Writable;
}

function stdinIsDevNull(): boolean {
  try {
    const fd0 = fstatSync(0);
    return fd0.isCharacterDevice() && fd0.rdev === statSync("/dev/null").rdev;
  } catch {
    return false;
  }
}

/**
 * The stdio of every task of a step. All files are opened up front, as the job user: a file that
 * cannot be opened fails the step before any task starts, with one line naming option and file.
 */
export class StepStdio {
  readonly #shared = new Map<string, WriteStream>();
  readonly #tasks = new Map<TaskRecord, TaskStdio>();
  readonly #stdinIsNull = stdinIsDevNull();

  constructor(readonly context: StdioContext) {}

  /** Opens every task's files; on failure closes what it opened and throws. */
  open(components: PlannedComponent[]): void {
    try {
      for (const c of components) for (const task of c.record.tasks) this.#tasks.set(task, this.#plan(c, task));
    } catch (error) {
      this.closeAll();
      throw error;
    }
  }

  of(task: TaskRecord): TaskStdio {
    const found = this.#tasks.get(task);
    if (!found) throw new Error(`no stdio planned for task ${task.globalId}`);
    return found;
  }

  #open(option: string, path: string, open: () => number, fds: number[]): number {
    try {
      const fd = open();
      fds.push(fd);
      return fd;
    } catch (error) {
      throw jobrtError("ERR_LAUNCH", { problem: fileError(option, path, error) });
    }
  }

  #target(pattern: string, option: string, c: PlannedComponent, task: TaskRecord, fds: number[]): number | Writable {
    const values = {
      jobId: c.record.jobId,
      stepId: c.record.stepId,
      taskId: task.globalId,
      nodeName: this.context.nodeName,
      nodeId: c.record.nodeId,
    };
    if (isPerTask(pattern)) {
      const path = expandFilePattern(pattern, option, values);
      return this.#open(option, path, () => openOutput(path, this.context.user), fds);
    }
    const path = expandFilePattern(pattern, option, { ...values, taskId: undefined });
    let stream = this.#shared.get(path);
    if (!stream) {
      const fd = this.#open(option, path, () => openOutput(path, this.context.user), []);
      stream = createWriteStream("", { fd, autoClose: true });
      this.#shared.set(path, stream);
    }
    return stream;
  }

  #input(c: PlannedComponent, task: TaskRecord, fds: number[]): StdioItem {
    const input = c.io.input ?? "all";
    const { totalTasks, lineMode } = this.context;
    if (input === "none") return "ignore";
    if (/^\d+$/.test(input)) return Number(input) === task.globalId ? "inherit" : "ignore";
    if (input === "all") {
      // Every task reading /dev/null itself is the same as copying its (empty) input to each.
      if (totalTasks === 1 || this.#stdinIsNull) return "inherit";
      if (lineMode) return "pipe";
      // Too few descriptors to copy stdin to every task: the first task gets it.
      return task.globalId === 0 ? "inherit" : "ignore";
    }
    const values = {
      jobId: c.record.jobId,
      stepId: c.record.stepId,
      taskId: task.globalId,
      nodeName: this.context.nodeName,
      nodeId: c.record.nodeId,
    };
    const path = expandFilePattern(input, "--input", values);
    return this.#open("--input", path, () => openInput(path, this.context.user), fds);
  }

  #plan(c: PlannedComponent, task: TaskRecord): TaskStdio {
    const { json, lineMode, totalTasks, stdout, stderr } = this.context;
    const fds: number[] = [];
    const stdio: StdioItem[] = [this.#input(c, task, fds), "inherit", "inherit"];
    const routes: OutputRoute[] = [];
    const mustPipe = Boolean(json || c.io.label || (totalTasks > 1 && lineMode));
    const outTarget = c.io.output !== undefined ? this.#target(c.io.output, "--output", c, task, fds) : undefined;
    const errTarget = c.io.error !== undefined ? this.#target(c.io.error, "--error", c, task, fds) : outTarget;
    for (const [fdIndex, target, stream, fallback] of [
      [1, outTarget, "stdout", stdout],
      [2, errTarget, "stderr", stderr],
    ] as const) {
      if (typeof target === "number") stdio[fdIndex] = target;
      else if (target !== undefined) {
        stdio[fdIndex] = "pipe";
        routes.push({ stream, dest: target });
      } else if (mustPipe) {
        stdio[fdIndex] = "pipe";
        routes.push({ stream, dest: json ? undefined : fallback });
      } else if (fallback === process.stdout || fallback === process.stderr) {
        stdio[fdIndex] = "inherit";
      } else {
        stdio[fdIndex] = "pipe";
        routes.push({ stream, dest: fallback });
      }
    }
    return { stdio, routes, fds };
  }

  /** Every task's stdio by task id (what the step's TaskSpawner is given). */
  all(): Map<number, StdioItem[]> {
    return new Map([...this.#tasks].map(([task, t]) => [task.globalId, t.stdio]));
  }

  /** Closes jobrt's copies of a started (or never started) task's descriptors. */
  closeTask(task: TaskRecord): void {
    const entry = this.#tasks.get(task);
    if (!entry) return;
    for (const fd of entry.fds.splice(0)) closeSync(fd);
  }

  closeAll(): void {
    for (const task of this.#tasks.keys()) this.closeTask(task);
    for (const s of this.#shared.values()) s.destroy();
  }

  /**
   * Copies a started task's piped output to its destinations, line by line (labelled with -l),
   * or into `output` events with --json. Resolves when the task's pipes have closed.
   */
  attach(
    child: TaskProcess,
    task: TaskRecord,
    label: boolean,
    emitLine: (stream: "stdout" | "stderr", line: string) => void,
  ): Promise<void>[] {
    const prefix = Buffer.from(`${task.globalId}: `);
    const labelled = (piece: Buffer, atLineStart: boolean) =>
      label && atLineStart ? Buffer.concat([prefix, piece]) : piece;
    const pipes: Promise<void>[] = [];
    for (const route of this.of(task).routes) {
      const source = (route.stream === "stdout" ? child.stdout : child.stderr) as Readable | null;
      // Ended before it was attached (the task wrote nothing and is gone): nothing to copy.
      if (!source || source.readableEnded) continue;
      if (route.dest) pipes.push(pipeLines(source, route.dest, labelled));
      else {
        // --json: each line becomes an event; the transform drops the newline.
        const sink = functionSink((line) => emitLine(route.stream, line.toString()));
        pipes.push(
          pipeLines(source, sink, (piece) => (piece.at(-1) === 0x0a ? piece.subarray(0, -1) : piece).toString()),
        );
      }
    }
    return pipes;
  }

  /** Ends the shared output files once every task is done. */
  async end(): Promise<void> {
    await Promise.all([...this.#shared.values()].map((s) => new Promise<void>((r) => s.end(r))));
  }
}
