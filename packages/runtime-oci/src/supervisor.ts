/**
 * The create/start supervisor (dist/supervisor.js): one per task, started by the host in place of
 * the task, already as the job user. It runs RunTimeCreate with the task's stdio (no pipe for the
 * container to hold, runtime-oci.md W2), waits for `created`, runs RunTimeStart, waits for the
 * container's init to exit, reads its real exit status (W1), kills/deletes whatever is left, and
 * exits with that status (a signal death is re-raised on itself).
 *
 * How the status is read: the host starts this program through a one-line perl prefix that makes
 * it a child subreaper (prctl PR_SET_CHILD_SUBREAPER, kept across execve). When RunTimeCreate's
 * runtime process exits, the container init it forked is re-parented to us. Node never reaps a
 * child it did not spawn, so when the init exits it stays a zombie, SIGCHLD wakes us at once (W3),
 * and /proc/<pid>/stat's exit_code field holds the waitpid status. The zombie is reaped by init
 * when we exit. Without the prefix (no perl) or when the runtime's container is not our
 * descendant (a daemon-based runtime), the exit is still noticed by a 5 ms /proc poll, but the
 * status cannot be known: the supervisor then says so and exits 125 instead of guessing.
 */
import { createReadStream, readFileSync } from "node:fs";
import { constants } from "node:os";
import {
  CommandError,
  type CommandResult,
  describeResult,
  parseState,
  runShellCommand,
  timedOutMessage,
} from "./command.js";
import { type Resume, parseResume } from "./fastpath.js";
import { writeAtomic } from "@jobrt/host-services";
import { missingCommandIn } from "./missingcommand.js";
import { type PatternValues, PatternValueError, expandPattern } from "./pattern.js";
import { decodeWaitStatus, procStat } from "@jobrt/host-services";
import { teardown } from "./teardown.js";
import { parseWatchdogVariable } from "./watchdog.js";

export interface SupervisorSpec {
  commands: {
    RunTimeCreate: string;
    RunTimeStart: string;
    RunTimeQuery: string;
    RunTimeKill: string;
    RunTimeDelete: string;
  };
  /** Pattern values for this task; `pid` is filled in once the container exists. */
  values: PatternValues;
  timeouts: { create: number; start: number; query: number; kill: number; delete: number };
  /** Time between RunTimeKill and SIGKILL. */
  graceMs: number;
  /** Directory where the container's pid is recorded for the host's cleanup. */
  taskDir?: string;
  verbose: boolean;
}

/** Exit status for "the runtime failed" (as docker and podman use it). */
export const SUPERVISOR_FAILURE = 125;

type Key = keyof SupervisorSpec["commands"];

/** Signal number → name, for re-raising the container's death signal on ourselves. */
const SIGNALS = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));

function say(message: string): void {
  process.stderr.write(`jobrt-oci: ${message}\n`);
}

function creds(pid: number): { uids: number[]; gids: number[] } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, "utf8");
    const field = (name: string) =>
      (new RegExp(`^${name}:\\s*(.*)$`, "m").exec(text)?.[1] ?? "").trim().split(/\s+/).map(Number);
    return { uids: field("Uid"), gids: field("Gid") };
  } catch {
    return undefined;
  }
}

/**
 * True when /proc shows us the zombie's exit_code: the kernel hides it (prints 0) unless we may
 * ptrace-read the process, which for a zombie means root or identical uids and gids.
 */
function canReadExitCode(pid: number): boolean {
  const uid = process.geteuid?.() ?? -1;
  if (uid === 0) return true;
  const c = creds(pid);
  const gid = process.getegid?.() ?? -1;
  return !!c?.uids.every((u) => u === uid) && !!c?.gids.every((g) => g === gid);
}

export function supervise(spec: SupervisorSpec): Promise<never> {
  return new Supervision(spec).run();
}

/** How the container's exit is watched: by us as its subreaper (with its status), or by polling. */
interface ExitWatch {
  reaper: boolean;
  /** The raw wait status, or undefined when it cannot be known. */
  status: Promise<number | undefined>;
}

/** One task's create/start lifecycle; every failure ends in #fail, every path in process.exit. */
class Supervision {
  readonly #spec: SupervisorSpec;
  readonly #env: Record<string, string>;
  readonly #subreaper: boolean;
  readonly #watchdog: ReturnType<typeof parseWatchdogVariable>;
  /** Set by the perl fast path (fastpath.ts) when it hands the task over to us half-way. */
  readonly #resume: Resume | undefined;
  readonly #cwd = process.cwd();
  readonly #values: PatternValues;
  #containerPid: number | undefined;
  #signalled: NodeJS.Signals | undefined;
  #killTimer: NodeJS.Timeout | undefined;

  constructor(spec: SupervisorSpec) {
    this.#spec = spec;
    const env = { ...process.env } as Record<string, string>;
    this.#subreaper = env.JOBRT_OCI_SUBREAPER === "1";
    this.#watchdog = parseWatchdogVariable(env.JOBRT_OCI_WATCHDOG);
    this.#resume = parseResume(env.JOBRT_OCI_RESUME);
    delete env.JOBRT_OCI_SUBREAPER;
    delete env.JOBRT_OCI_WATCHDOG;
    delete env.JOBRT_OCI_RESUME;
    this.#env = env;
    this.#values = { ...spec.values };
    this.#signalled = this.#resume?.signalled;
    for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const)
      process.on(sig, (s: NodeJS.Signals) => this.#forward(s));
  }

  async run(): Promise<never> {
    await this.#create();
    const pid = await this.#waitCreated();
    this.#values.pid = pid;
    this.#recordPid(pid);
    const resume = this.#resume;
    if (resume?.start !== undefined)
      return this.#fail(resumedStartFailure(resume, this.#spec.timeouts.start, this.#expand("RunTimeStart")));
    if (this.#signalled) return this.#fail(`${this.#signalled} before the container started`);
    // The exit is watched from now on: it may happen before start returns.
    const exit = this.#watchExit(pid);
    let started: CommandResult;
    try {
      started = await this.#run("RunTimeStart", "inherit", this.#spec.timeouts.start);
    } catch (error) {
      return this.#fail((error as Error).message);
    }
    if (started.code !== 0)
      return this.#fail(`RunTimeStart ${describeResult(started)}: ${this.#expand("RunTimeStart")}`);
    const status = await exit.status;
    if (status === undefined) {
      return this.#fail(
        exit.reaper
          ? "the container exited but its exit status is not readable (its credentials differ from the job user's)"
          : "the container exited but its exit status is not available (see docs/runtime-oci.md, create/start mode)",
      );
    }
    return this.#finish(decodeWaitStatus(status), true);
  }

  #log(m: string): void {
    if (this.#spec.verbose) say(m);
  }

  #expand(key: Key): string {
    return expandPattern(this.#spec.commands[key], this.#values, { shell: true });
  }

  #run(key: Key, stdio: "capture" | "inherit", timeoutMs: number): Promise<CommandResult> {
    const command = this.#expand(key);
    this.#log(`${key}: ${command}`);
    return runShellCommand(command, { key, env: this.#env, cwd: this.#cwd, timeoutMs, stdio });
  }

  /** A signal to us: the container gets RunTimeKill, then SIGKILL after the grace time. */
  #forward(sig: NodeJS.Signals): void {
    this.#signalled ??= sig;
    const pid = this.#containerPid;
    if (pid === undefined) return;
    void this.#run("RunTimeKill", "capture", this.#spec.timeouts.kill).catch((e: Error) => say(e.message));
    this.#killTimer ??= setTimeout(() => {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }, this.#spec.graceMs);
  }

  /** 1. RunTimeCreate, with the task's stdio (or its result as the watchdog or the fast path has it). */
  async #create(): Promise<void> {
    const resume = this.#resume;
    const watchdog = this.#watchdog;
    let created: CommandResult;
    try {
      if (resume) {
        // The fast path has read the watchdog's report already: its pipe is closed.
        created = resumedCreate(
          resume.create ?? "lost",
          this.#spec.timeouts.create,
          this.#expand("RunTimeCreate"),
          watchdog?.pid,
        );
      } else if (watchdog) {
        this.#log(`RunTimeCreate (run by the watchdog, pid ${watchdog.pid}): ${this.#expand("RunTimeCreate")}`);
        created = await watchdogCreate(watchdog, this.#spec.timeouts.create, this.#expand("RunTimeCreate"));
      } else {
        created = await this.#run("RunTimeCreate", "inherit", this.#spec.timeouts.create);
      }
    } catch (error) {
      return this.#fail((error as Error).message);
    }
    if (created.code !== 0) {
      // runc create looks the command up before the task exists, and fails for a missing one.
      const missing =
        created.code !== undefined && !this.#signalled && this.#spec.taskDir
          ? missingCommandIn(this.#spec.taskDir)
          : undefined;
      if (missing) {
        say(missing.message);
        return this.#finish({ code: missing.status });
      }
      return this.#fail(`RunTimeCreate ${describeResult(created)}: ${this.#expand("RunTimeCreate")}`);
    }
    if (resume?.query === "timeout")
      return this.#fail(timedOutMessage("RunTimeQuery", this.#spec.timeouts.query, this.#expand("RunTimeQuery")));
  }

  /** 2. Waits for "created" (a tight, bounded back-off instead of Slurm's 0.5 s budget); the container's pid. */
  async #waitCreated(): Promise<number> {
    const deadline = Date.now() + this.#spec.timeouts.create;
    let delay = 1;
    if (this.#resume?.pid !== undefined) this.#containerPid = this.#resume.pid;
    while (this.#containerPid === undefined) {
      let st: ReturnType<typeof parseState>;
      try {
        st = parseState(await this.#run("RunTimeQuery", "capture", this.#spec.timeouts.query));
      } catch (error) {
        return this.#fail((error as Error).message);
      }
      if (st?.status === "created") {
        this.#containerPid = st.pid;
        break;
      }
      if (st && st.status !== "creating")
        return this.#fail(`container is ${st.status} after RunTimeCreate, expected created`);
      if (Date.now() > deadline)
        return this.#fail(
          `container did not reach "created" within ${this.#spec.timeouts.create / 1000} s of RunTimeCreate`,
        );
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 50);
    }
    if (this.#containerPid === undefined) return this.#fail("RunTimeQuery reported no pid for the created container");
    return this.#containerPid;
  }

  /** The container's pid, for the host's cleanup (best effort). */
  #recordPid(pid: number): void {
    if (!this.#spec.taskDir) return;
    try {
      writeAtomic(this.#spec.taskDir, "container.pid", `${pid}\n`, 0o600);
    } catch (error) {
      this.#log(`cannot record the container pid: ${(error as Error).message}`);
    }
  }

  /** 3. Watches for the init's exit: as its subreaper (SIGCHLD, with its status) or by a 5 ms poll. */
  #watchExit(pid: number): ExitWatch {
    const first = procStat(pid);
    const reaper = this.#subreaper && first?.ppid === process.pid;
    if (!reaper) {
      this.#log(
        `not the container's parent (${this.#subreaper ? "the runtime did not leave it to us" : "no subreaper"}): exit status will not be available`,
      );
    }
    const status = new Promise<number | undefined>((resolve) => {
      const check = () => {
        const st = procStat(pid);
        if (reaper) {
          if (st?.state === "Z") {
            stop();
            resolve(canReadExitCode(pid) ? st.exitCode : undefined);
          } else if (!st) {
            stop();
            resolve(undefined);
          }
        } else if (!st || st.state === "Z" || st.startTime !== first?.startTime) {
          stop();
          resolve(undefined);
        }
      };
      const timer = setInterval(check, reaper ? 100 : 5);
      const stop = () => {
        clearInterval(timer);
        process.removeListener("SIGCHLD", check);
      };
      if (reaper) process.on("SIGCHLD", check);
      check();
    });
    return { reaper, status };
  }

  async #fail(message: string): Promise<never> {
    say(message);
    return this.#finish(this.#signalled ? { signal: signalNumber(this.#signalled) } : { code: SUPERVISOR_FAILURE });
  }

  /** Tears the container down and exits with the task's status (a signal death is re-raised). */
  async #finish(status: { code?: number; signal?: number }, exited = false): Promise<never> {
    clearTimeout(this.#killTimer);
    await this.#teardown(exited);
    // Torn down here: the watchdog has nothing left to do (a kill of its group, not a signal it traps).
    if (this.#watchdog) killGroup(this.#watchdog.pid);
    if (status.signal !== undefined) {
      const name = SIGNALS.get(status.signal);
      for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.removeAllListeners(sig);
      if (name) process.kill(process.pid, name);
      process.exit(128 + status.signal);
    }
    process.exit(status.code ?? SUPERVISOR_FAILURE);
  }

  #teardown(exited: boolean): Promise<unknown> {
    return teardown({
      hasQuery: true,
      // The init's exit was seen: the container is stopped, no need to ask the runtime first.
      ...(exited ? { firstState: { status: "stopped" } } : {}),
      graceMs: this.#spec.graceMs,
      run: async (key) => {
        try {
          return await this.#run(
            key,
            "capture",
            key === "RunTimeDelete" ? this.#spec.timeouts.delete : this.#spec.timeouts.kill,
          );
        } catch (error) {
          if (error instanceof PatternValueError) {
            this.#log(`${key} not run: ${error.message}`);
            return undefined;
          }
          throw error;
        }
      },
      forceKill: async (pid) => {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      },
      log: (level, m) => (level === "warn" ? say(m) : this.#log(m)),
    });
  }
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/**
 * RunTimeCreate's result as the watchdog reports it: its exit status, one line on the pipe. Past
 * `timeoutMs` the watchdog's group (it and the create command) is killed, as runShellCommand does.
 */
function watchdogCreate(w: { pid: number; fd: number }, timeoutMs: number, command: string): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    let text = "";
    const stream = createReadStream("", { fd: w.fd, encoding: "utf8" });
    const timer = setTimeout(() => {
      killGroup(w.pid);
      stream.destroy();
      reject(
        new CommandError(
          "ERR_RUNTIME_TIMEOUT",
          `RunTimeCreate did not finish within ${timeoutMs / 1000} s and was killed: ${command}`,
          "RunTimeCreate",
        ),
      );
    }, timeoutMs);
    stream.on("data", (d) => {
      text += String(d);
    });
    stream.on("error", () => {});
    stream.on("close", () => {
      clearTimeout(timer);
      const code = /^(\d+)\n/.exec(text)?.[1];
      if (code === undefined)
        reject(
          new CommandError(
            "ERR_RUNTIME_COMMAND",
            `RunTimeCreate: the watchdog (pid ${w.pid}) ended without its status: ${command}`,
            "RunTimeCreate",
          ),
        );
      else resolve({ code: Number(code), signal: undefined, stdout: "", stderr: "" });
    });
  });
}

/** RunTimeCreate's result as the fast path reported it. */
function resumedCreate(
  create: NonNullable<Resume["create"]>,
  timeoutMs: number,
  command: string,
  watchdogPid: number | undefined,
): CommandResult {
  if (create === "timeout")
    throw new CommandError(
      "ERR_RUNTIME_TIMEOUT",
      timedOutMessage("RunTimeCreate", timeoutMs, command),
      "RunTimeCreate",
    );
  if (create === "lost")
    throw new CommandError(
      "ERR_RUNTIME_COMMAND",
      `RunTimeCreate: the watchdog (pid ${watchdogPid}) ended without its status: ${command}`,
      "RunTimeCreate",
    );
  return { code: create, signal: undefined, stdout: "", stderr: "" };
}

/** The message for a RunTimeStart (or the wait after it) that failed in the fast path. */
function resumedStartFailure(resume: Resume, timeoutMs: number, command: string): string {
  const start = resume.start;
  if (start === "timeout") return timedOutMessage("RunTimeStart", timeoutMs, command);
  if (start === 0 || start === undefined)
    return "the container exited but its exit status is not available (see docs/runtime-oci.md, create/start mode)";
  const result: CommandResult =
    typeof start === "number"
      ? { code: start, signal: undefined, stdout: "", stderr: "" }
      : { code: undefined, signal: SIGNALS.get(Number(start.slice(3))) ?? "SIGKILL", stdout: "", stderr: "" };
  return `RunTimeStart ${describeResult(result)}: ${command}`;
}

function signalNumber(sig: NodeJS.Signals): number {
  return constants.signals[sig] ?? 15;
}
