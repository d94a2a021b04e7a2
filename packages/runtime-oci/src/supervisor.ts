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
import { type CommandResult, describeResult, parseState, runShellCommand, timedOutMessage } from "./command.js";
import { type Resume, parseResume } from "./fastpath.js";
import { writeAtomic } from "./fsops.js";
import { missingCommandIn } from "./missingcommand.js";
import { type PatternValues, PatternValueError, expandPattern } from "./pattern.js";
import { decodeWaitStatus } from "@jobrt/host-services";
import { teardown } from "./teardown.js";
import { watchExit } from "./exitwatch.js";
import { resumedCreate, resumedStartFailure, watchdogCreate } from "./handedcreate.js";
import { killGroup, signalName, signalNumber } from "./signals.js";
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

function say(message: string): void {
  process.stderr.write(`jobrt-oci: ${message}\n`);
}

export function supervise(spec: SupervisorSpec): Promise<never> {
  return new Supervision(spec).run();
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
    const exit = watchExit(pid, this.#subreaper, (m) => this.#log(m));
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
      const name = signalName(status.signal);
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
