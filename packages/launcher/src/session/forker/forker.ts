import { type ChildProcess, spawn } from "node:child_process";
import { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import { constants as osConstants } from "node:os";
import { dirname, join } from "node:path";
import type { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { ExecSpec } from "@jobrt/core";
import { type SyscallName, decodeWaitStatus, syscallNumbers } from "@jobrt/host-services";
import { type ForkOptions, forkRequest } from "./forkerrequest.js";
import { findPerl } from "../../perl.js";
import { signalName } from "../task/status.js";

/**
 * The forker's program, beside this module: src/session/ and dist/session/ of this package, and
 * dist/ of the jobrt CLI, whose bundle holds this module (each package's build copies it there).
 * A file, not `-e`: its 6 KB were its whole command line in ps.
 */
export const FORKER_PROGRAM = join(dirname(fileURLToPath(import.meta.url)), "forker.pl");

/** One descriptor of a task's stdio, as Node's spawn takes it. */
export type StdioItem = "pipe" | "ignore" | "inherit" | number;

/**
 * What a step's forker runs when jobrt dies while the step's tasks run: jobrt's own crash cleanup
 * of that step (`jobrt gc --pid`), as the forker's user (forker.pl, orphaned).
 */
export interface AfterDeath {
  /** The command, its program an absolute path. */
  argv: string[];
  /** Its environment, which is the forker's own too: a name perl reads (PERL*) is left out. */
  env: Record<string, string>;
}

/** The forker's arguments after the syscall numbers, and its environment. */
function afterDeathOptions(afterDeath: AfterDeath | undefined): { args: string[]; env: Record<string, string> } {
  if (!afterDeath) return { args: [], env: {} };
  const env = Object.fromEntries(Object.entries(afterDeath.env).filter(([name]) => !name.startsWith("PERL")));
  return { args: ["--", String(process.pid), ...afterDeath.argv], env };
}

/** A started task process: what the host needs of Node's ChildProcess. */
export interface TaskProcess extends EventEmitter {
  readonly pid: number | undefined;
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  /**
   * The raw wait status once the process ended (exit code in bits 8-15, signal in bits 0-6), set
   * before "exit" is emitted; null when its end was lost. What jobrt decides the task's status from
   * (supervision.ts); the events' code and name are for display.
   */
  readonly waitStatus?: number | null;
  /** `signal` is Node's name of the signal, or "signal N" for one Node has no name for. */
  on(event: "exit" | "close", listener: (code: number | null, signal: string | null) => void): this;
  on(event: "error", listener: (error: Error) => void): this;
  once(event: "exit" | "close", listener: (code: number | null, signal: string | null) => void): this;
  once(event: "error", listener: (error: Error) => void): this;
}

/** A joined task's forker (docs/node-step.md): its connection to this jobrt. */
export interface JoinedForker {
  socket: Socket;
  /** The joiner's pid: the forker, whose child is the task. */
  pid: number;
  /** Descriptors it passes on purpose: [its number, the task's]. */
  passed: [number, number][];
  /** It caught this signal (a name such as "TERM"): slurmstepd signalled the task. */
  onSignal: (name: string) => void;
}

/** A joined forker's "P" and "E" requests (forker.pl). */
function joinedRequest(kind: "P" | "E", text: string): string {
  const payload = `${kind}\0${text}`;
  return `${Buffer.byteLength(payload)}\n${payload}`;
}

/** The syscalls forker.pl makes, in the order it takes their numbers. */
const FORKER_SYSCALLS: readonly SyscallName[] = [
  "setsid",
  "dup3",
  "fcntl",
  "close",
  "setgroups",
  "setresgid",
  "setresuid",
  "execve",
  "openat",
  "write",
  "pipe2",
  "read",
];
/** O_CLOEXEC, forker.pl's last number: 0o2000000 on every architecture that has all the syscalls above. */
const O_CLOEXEC = 0o2000000;

/** The numbers forker.pl takes first: its syscalls' on this architecture, then O_CLOEXEC. */
export function forkerNumbers(): string[] {
  return [...syscallNumbers(FORKER_SYSCALLS)!, O_CLOEXEC].map(String);
}

/** Why no forker can be had here, or the perl to run it with. */
export function forkerPerl(): { perl: string } | { missing: string } {
  if (!syscallNumbers(FORKER_SYSCALLS)) return { missing: `no syscall table for ${process.arch}` };
  return findPerl();
}

const ERRNO_NAMES = new Map(Object.entries(osConstants.errno).map(([name, n]) => [n, name]));

/** The error of a task that could not be started, shaped like Node's spawn errors. */
function startError(file: string, errno: number, stage: string): NodeJS.ErrnoException {
  const code = ERRNO_NAMES.get(errno) ?? `errno ${errno}`;
  const exec = stage === "exec";
  const error: NodeJS.ErrnoException = new Error(exec ? `spawn ${file} ${code}` : `${stage}: ${code}`);
  error.code = code;
  error.errno = -errno;
  error.syscall = exec ? `spawn ${file}` : stage;
  error.path = file;
  return error;
}

/** A task the forker started; its exit comes from the forker's raw wait status. */
class ForkedTask extends EventEmitter implements TaskProcess {
  #open = 0;
  #exit: [number | null, string | null] | undefined;
  waitStatus: number | null | undefined;

  constructor(
    readonly pid: number,
    readonly stdin: Writable | null,
    readonly stdout: Readable | null,
    readonly stderr: Readable | null,
  ) {
    super();
    for (const s of [stdout, stderr]) {
      // A task that wrote nothing and ended at once: its pipe may have closed before its start was read.
      if (!s || s.closed) continue;
      this.#open++;
      s.once("close", () => {
        this.#open--;
        this.#maybeClose();
      });
    }
  }

  /** `status`: the raw wait status, null when it was lost. */
  ended(status: number | null): void {
    if (this.#exit) return;
    this.waitStatus = status;
    const decoded = status === null ? undefined : decodeWaitStatus(status);
    const code = decoded?.code ?? null;
    const signal = decoded?.signal === undefined ? null : signalName(decoded.signal);
    this.#exit = [code, signal];
    this.emit("exit", code, signal);
    this.#maybeClose();
  }

  #maybeClose(): void {
    if (this.#exit && this.#open === 0) this.emit("close", ...this.#exit);
  }
}

interface Slot {
  /** The forker's descriptors for the task's 0, 1, 2 (-1: /dev/null). */
  fds: number[];
  /** The forker's stdio index of each piped descriptor. */
  pipes: (number | undefined)[];
  /** Descriptors passed on purpose (pmi.ts): [the forker's number, the task's number]. */
  extra: [number, number][];
}

/**
 * A step's task forker: one perl process, started once per step with every task's stdio, that
 * forks and execs each task on request and reports its pid and its raw wait status. Node's
 * child_process turns a wait status into a signal *name* and has none for the real-time signals
 * (34-64), so a task killed by one looked like exit 0; Node cannot see the wait status of a
 * process it did not fork itself, so a task's parent must be a program that can.
 */
export class TaskForker {
  readonly #child: ChildProcess | undefined;
  readonly #joined: JoinedForker | undefined;
  readonly #ctl: Socket;
  readonly #slots = new Map<number, Slot>();
  readonly #pending = new Map<
    number,
    { file: string; slot: Slot; resolve: (t: TaskProcess) => void; reject: (e: Error) => void }
  >();
  readonly #running = new Map<number, ForkedTask>();
  /** The tasks' piped stdio, by the forker's descriptor number. */
  readonly #pipes: (Socket | undefined)[] = [];
  #lines = "";
  #gone: string | undefined;
  /** Resolves once the forker has exited and been reaped. */
  readonly exited: Promise<void>;

  get pid(): number | undefined {
    return this.#joined?.pid ?? this.#child?.pid;
  }

  /**
   * `stdios`: each task's stdio (by task id); `onLost`: the forker died with tasks running;
   * `afterDeath`: what the forker runs if jobrt dies first. Or, instead of a perl to start, a
   * joined task's own forker (forker.pl --join, docs/node-step.md): its connection, whose stdio
   * is the task's own, and the one descriptor it passes on purpose.
   */
  constructor(
    forker: string | JoinedForker,
    stdios: Map<number, StdioItem[]>,
    readonly onLost: (why: string) => void,
    afterDeath?: AfterDeath,
  ) {
    if (typeof forker !== "string") {
      this.#joined = forker;
      this.#ctl = forker.socket;
      for (const id of stdios.keys()) this.#slots.set(id, { fds: [0, 1, 2], pipes: [], extra: forker.passed });
      this.exited = new Promise((resolve) => forker.socket.once("close", () => resolve()));
    } else {
      this.#child = this.#spawn(forker, stdios, afterDeath);
      this.#ctl = this.#child.stdio[3] as Socket;
      const child = this.#child;
      this.exited = new Promise((resolve) => {
        child.once("exit", () => resolve());
        child.once("error", () => resolve());
      });
    }
    this.#ctl.setEncoding("latin1").on("data", (d: string) => this.#onReports(d));
    this.#ctl.on("error", () => {});
    // Not 'exit': its last reports may still be unread then.
    this.#ctl.on("close", () =>
      this.#lose(`exited (${this.#child?.exitCode ?? this.#child?.signalCode ?? "its control socket closed"})`),
    );
  }

  /** Starts the perl forker with every task's stdio (the slots say where each task's is). */
  #spawn(perl: string, stdios: Map<number, StdioItem[]>, afterDeath: AfterDeath | undefined): ChildProcess {
    const stdio: StdioItem[] = ["inherit", "inherit", "inherit", "pipe"];
    for (const [id, items] of stdios) {
      const slot: Slot = { fds: [], pipes: [], extra: [] };
      for (const [t, item] of items.slice(0, 3).entries()) {
        if (item === "inherit") slot.fds.push(t);
        else if (item === "ignore") slot.fds.push(-1);
        else {
          stdio.push(item);
          slot.fds.push(stdio.length - 1);
          slot.pipes[t] = item === "pipe" ? stdio.length - 1 : undefined;
        }
      }
      for (const [t, item] of items.entries()) {
        if (t < 3 || typeof item !== "number") continue;
        stdio.push(item);
        slot.extra.push([stdio.length - 1, t]);
      }
      this.#slots.set(id, slot);
    }
    // No PERL* variable: PERL5OPT or PERL5LIB of whoever runs jobrt must not run code as root.
    const orphan = afterDeathOptions(afterDeath);
    const child = spawn(perl, ["-f", "--", FORKER_PROGRAM, ...forkerNumbers(), ...orphan.args], {
      stdio,
      detached: true,
      env: orphan.env,
      argv0: "jobrt-task-forker",
    });
    child.on("error", (error) => this.#lose(`could not be started (${perl}): ${error.message}`));
    // Reaped by jobrt, not orphaned: its CPU and its tasks' then count in jobrt's own (time(1), the
    // benchmarks' whole-tree CPU), and nothing of the step outlives jobrt.
    // Node's spawn makes both ends of every pipe at once: EMFILE where one task at a time fits.
    if (child.pid === undefined) throw new Error(`cannot start ${perl} with the stdio of ${stdios.size} task(s)`);
    // The tasks' pipes are the tasks' streams, not the forker's: Node resumes every stdio stream
    // of an exited child that nobody reads yet, which would throw away a task's output when the
    // forker's exit is seen before the task's start (and its reader) is. Node keeps no other use
    // of the array.
    for (const [i, s] of child.stdio.entries()) {
      if (i > 3 && s) this.#pipes[i] = s as Socket;
      if (i > 3) child.stdio[i] = null;
    }
    return child;
  }

  /**
   * SIGKILLs a forker that has not exited (stopped by a task, say): its unreported tasks end as
   * killed (the step's SIGKILL reached them), `why` says so once.
   */
  kill(why: string): void {
    if (this.#gone !== undefined || this.#child?.exitCode != null || this.#child?.signalCode != null) return;
    this.#lose(why, "SIGKILL");
    try {
      if (this.#child) this.#child.kill("SIGKILL");
      else if (this.pid !== undefined) process.kill(this.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }

  /** Starts task `id` (whose stdio was given at construction); resolves once it runs. */
  start(id: number, spec: ExecSpec, options: ForkOptions = {}): Promise<TaskProcess> {
    const slot = this.#slots.get(id);
    if (!slot) throw new Error(`task forker: no stdio for task ${id}`);
    this.#slots.delete(id);
    const request = forkRequest(id, slot.fds, spec, options, slot.extra);
    if (this.#gone !== undefined) return Promise.reject(new Error(`the task forker ${this.#gone}`));
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { file: spec.argv[0]!, slot, resolve, reject });
      this.#ctl.write(request);
      // The last task is asked for: the forker exits right after reporting its end, while jobrt
      // still copies the task's output, instead of after jobrt's close() (a step's last ms). A
      // joined forker waits for its task's end (`end`).
      if (this.#slots.size === 0 && !this.#joined) this.#ctl.end();
    });
  }

  /**
   * No more tasks: the forker exits once it has reported the end of every task it started.
   * Resolves when it has exited and been reaped (at once after the last task's end was reported).
   */
  close(): Promise<void> {
    if (!this.#ctl.writableEnded) this.#ctl.end();
    return this.exited;
  }

  /** A joined forker prints `text` on its stderr, which is its task's. */
  tell(text: string): void {
    if (this.#joined && !this.#ctl.writableEnded) this.#ctl.write(joinedRequest("P", text));
  }

  /** A joined forker's task has ended with `status` (128+N for signal N): it exits with it. */
  end(status: number): void {
    if (!this.#joined || this.#ctl.writableEnded) return;
    this.#ctl.end(joinedRequest("E", String(status)));
  }

  #onReports(data: string): void {
    this.#lines += data;
    let nl = this.#lines.indexOf("\n");
    while (nl >= 0) {
      const [kind, a = "", b = "", ...stage] = this.#lines.slice(0, nl).split(" ");
      this.#lines = this.#lines.slice(nl + 1);
      nl = this.#lines.indexOf("\n");
      if (kind === "X") this.#exited(Number(a), Number(b));
      else if (kind === "K") this.#joined?.onSignal(a);
      else this.#started(kind, Number(a), Number(b), stage.join(" "));
    }
  }

  #started(kind: string | undefined, id: number, n: number, stage: string): void {
    const wait = this.#pending.get(id);
    if (!wait) return;
    this.#pending.delete(id);
    if (kind === "F") {
      wait.reject(startError(wait.file, n, stage));
      return;
    }
    const stream = (t: number) =>
      wait.slot.pipes[t] === undefined ? null : (this.#pipes[wait.slot.pipes[t]!] ?? null);
    const task = new ForkedTask(n, stream(0), stream(1), stream(2));
    this.#running.set(n, task);
    wait.resolve(task);
  }

  /** A raw wait status: exit code in bits 8-15, or the signal in bits 0-6. */
  #exited(pid: number, status: number): void {
    const task = this.#running.get(pid);
    if (!task) return;
    this.#running.delete(pid);
    // A start and an end read in one chunk: the end waits until the start's awaiter listens.
    setImmediate(() => task.ended(status));
  }

  /** `signal`: how the tasks it did not report ended, when jobrt knows (it SIGKILLed them). */
  #lose(why: string, signal: "SIGKILL" | null = null): void {
    if (this.#gone !== undefined) return;
    this.#gone = why;
    for (const wait of this.#pending.values()) wait.reject(new Error(`the task forker ${why}`));
    this.#pending.clear();
    if (this.#running.size === 0) return;
    this.onLost(
      `the task forker ${why} while ${this.#running.size} task(s) ran: their exit status is lost${signal ? `, reported as ${signal}` : ""}`,
    );
    // SIGKILL's raw wait status is its number: jobrt sent it.
    for (const task of this.#running.values()) task.ended(signal === null ? null : osConstants.signals.SIGKILL);
    this.#running.clear();
  }
}
