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
import { CommandError, type CommandResult, describeResult, parseState, runCommand, timedOutMessage } from "./command.js";
import { type Resume, parseResume } from "./fastpath.js";
import { writeAtomic } from "./fsops.js";
import { missingCommandIn } from "./missingcommand.js";
import { type PatternValues, PatternValueError, expandPattern } from "./pattern.js";
import { decodeWaitStatus, procStat } from "./proc.js";
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
      (new RegExp(`^${name}:\\s*(.*)$`, "m").exec(text)?.[1] ?? "")
        .trim()
        .split(/\s+/)
        .map(Number);
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

export async function supervise(spec: SupervisorSpec): Promise<never> {
  const env = { ...process.env } as Record<string, string>;
  const subreaper = env.JOBRT_OCI_SUBREAPER === "1";
  const watchdog = parseWatchdogVariable(env.JOBRT_OCI_WATCHDOG);
  // Set by the perl fast path (fastpath.ts) when it hands the task over to us half-way.
  const resume = parseResume(env.JOBRT_OCI_RESUME);
  delete env.JOBRT_OCI_SUBREAPER;
  delete env.JOBRT_OCI_WATCHDOG;
  delete env.JOBRT_OCI_RESUME;
  const cwd = process.cwd();
  const values: PatternValues = { ...spec.values };
  const log = (m: string) => {
    if (spec.verbose) say(m);
  };

  const expand = (key: Key): string => expandPattern(spec.commands[key], values, { shell: true });
  const run = async (key: Key, stdio: "capture" | "inherit", timeoutMs: number): Promise<CommandResult> => {
    const command = expand(key);
    log(`${key}: ${command}`);
    return runCommand(command, { key, env, cwd, timeoutMs, stdio });
  };

  let containerPid: number | undefined;
  let signalled: NodeJS.Signals | undefined = resume?.signalled;
  let killTimer: NodeJS.Timeout | undefined;
  let wake: (() => void) | undefined;

  const forward = (sig: NodeJS.Signals) => {
    signalled ??= sig;
    wake?.();
    if (containerPid === undefined) return;
    void run("RunTimeKill", "capture", spec.timeouts.kill).catch((e: Error) => say(e.message));
    killTimer ??= setTimeout(() => {
      if (containerPid !== undefined) {
        try {
          process.kill(containerPid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }, spec.graceMs);
  };
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(sig, forward);

  const finish = async (status: { code?: number; signal?: number }, exited = false): Promise<never> => {
    clearTimeout(killTimer);
    await teardown({
      hasQuery: true,
      // The init's exit was seen: the container is stopped, no need to ask the runtime first.
      ...(exited ? { firstState: { status: "stopped" } } : {}),
      graceMs: spec.graceMs,
      run: async (key) => {
        try {
          return await run(key, "capture", key === "RunTimeDelete" ? spec.timeouts.delete : spec.timeouts.kill);
        } catch (error) {
          if (error instanceof PatternValueError) {
            log(`${key} not run: ${error.message}`);
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
      log: (level, m) => (level === "warn" ? say(m) : log(m)),
    });
    // Torn down here: the watchdog has nothing left to do (a kill of its group, not a signal it traps).
    if (watchdog) killGroup(watchdog.pid);
    if (status.signal !== undefined) {
      const name = SIGNALS.get(status.signal);
      for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.removeAllListeners(sig);
      if (name) process.kill(process.pid, name);
      process.exit(128 + status.signal);
    }
    process.exit(status.code ?? SUPERVISOR_FAILURE);
  };
  const fail = async (message: string): Promise<never> => {
    say(message);
    return finish(signalled ? { signal: signalNumber(signalled) } : { code: SUPERVISOR_FAILURE });
  };

  // 1. create, with the task's stdio.
  let created: CommandResult;
  try {
    if (resume) {
      // The fast path has read the watchdog's report already: its pipe is closed.
      created = resumedCreate(resume.create ?? "lost", spec.timeouts.create, expand("RunTimeCreate"), watchdog?.pid);
    } else if (watchdog) {
      log(`RunTimeCreate (run by the watchdog, pid ${watchdog.pid}): ${expand("RunTimeCreate")}`);
      created = await watchdogCreate(watchdog, spec.timeouts.create, expand("RunTimeCreate"));
    } else {
      created = await run("RunTimeCreate", "inherit", spec.timeouts.create);
    }
  } catch (error) {
    return fail((error as Error).message);
  }
  if (created.code !== 0) {
    // runc create looks the command up before the task exists, and fails for a missing one.
    const missing = created.code !== undefined && !signalled && spec.taskDir ? missingCommandIn(spec.taskDir) : undefined;
    if (missing) {
      say(missing.message);
      return finish({ code: missing.status });
    }
    return fail(`RunTimeCreate ${describeResult(created)}: ${expand("RunTimeCreate")}`);
  }
  if (resume?.query === "timeout") return fail(timedOutMessage("RunTimeQuery", spec.timeouts.query, expand("RunTimeQuery")));

  // 2. wait for "created" (tight, bounded back-off instead of Slurm's 0.5 s budget).
  const deadline = Date.now() + spec.timeouts.create;
  let delay = 1;
  if (resume?.pid !== undefined) containerPid = resume.pid;
  while (containerPid === undefined) {
    let st: ReturnType<typeof parseState>;
    try {
      st = parseState(await run("RunTimeQuery", "capture", spec.timeouts.query));
    } catch (error) {
      return fail((error as Error).message);
    }
    if (st?.status === "created") {
      containerPid = st.pid;
      break;
    }
    if (st && st.status !== "creating") return fail(`container is ${st.status} after RunTimeCreate, expected created`);
    if (Date.now() > deadline) return fail(`container did not reach "created" within ${spec.timeouts.create / 1000} s of RunTimeCreate`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 50);
  }
  if (containerPid === undefined) return fail("RunTimeQuery reported no pid for the created container");
  values.pid = containerPid;
  if (spec.taskDir) {
    try {
      writeAtomic(spec.taskDir, "container.pid", `${containerPid}\n`, 0o600);
    } catch (error) {
      log(`cannot record the container pid: ${(error as Error).message}`);
    }
  }
  if (resume?.start !== undefined) return fail(resumedStartFailure(resume, spec.timeouts.start, expand("RunTimeStart")));
  if (signalled) return fail(`${signalled} before the container started`);

  const first = procStat(containerPid);
  const reaper = subreaper && first?.ppid === process.pid;
  if (!reaper) {
    log(`not the container's parent (${subreaper ? "the runtime did not leave it to us" : "no subreaper"}): exit status will not be available`);
  }

  // 3. watch for the exit from now on (it may happen before start returns).
  const exited = new Promise<number | undefined>((resolve) => {
    const check = () => {
      const st = procStat(containerPid as number);
      if (reaper) {
        if (st?.state === "Z") {
          cleanupWatch();
          resolve(canReadExitCode(containerPid as number) ? st.exitCode : undefined);
        } else if (!st) {
          cleanupWatch();
          resolve(undefined);
        }
      } else if (!st || st.state === "Z" || st.startTime !== first?.startTime) {
        cleanupWatch();
        resolve(undefined);
      }
    };
    const timer = setInterval(check, reaper ? 100 : 5);
    const cleanupWatch = () => {
      clearInterval(timer);
      process.removeListener("SIGCHLD", check);
    };
    if (reaper) process.on("SIGCHLD", check);
    check();
  });

  // 4. start.
  let started: CommandResult;
  try {
    started = await run("RunTimeStart", "inherit", spec.timeouts.start);
  } catch (error) {
    return fail((error as Error).message);
  }
  if (started.code !== 0) return fail(`RunTimeStart ${describeResult(started)}: ${expand("RunTimeStart")}`);

  const status = await exited;
  if (status === undefined) {
    return fail(
      reaper
        ? "the container exited but its exit status is not readable (its credentials differ from the job user's)"
        : "the container exited but its exit status is not available (see docs/runtime-oci.md, create/start mode)",
    );
  }
  return finish(decodeWaitStatus(status), true);
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
 * `timeoutMs` the watchdog's group (it and the create command) is killed, as runCommand does.
 */
function watchdogCreate(w: { pid: number; fd: number }, timeoutMs: number, command: string): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    let text = "";
    const stream = createReadStream("", { fd: w.fd, encoding: "utf8" });
    const timer = setTimeout(() => {
      killGroup(w.pid);
      stream.destroy();
      reject(new CommandError("ERR_RUNTIME_TIMEOUT", `RunTimeCreate did not finish within ${timeoutMs / 1000} s and was killed: ${command}`, "RunTimeCreate"));
    }, timeoutMs);
    stream.on("data", (d) => {
      text += String(d);
    });
    stream.on("error", () => {});
    stream.on("close", () => {
      clearTimeout(timer);
      const code = /^(\d+)\n/.exec(text)?.[1];
      if (code === undefined) reject(new CommandError("ERR_RUNTIME_COMMAND", `RunTimeCreate: the watchdog (pid ${w.pid}) ended without its status: ${command}`, "RunTimeCreate"));
      else resolve({ code: Number(code), signal: undefined, stdout: "", stderr: "" });
    });
  });
}

/** RunTimeCreate's result as the fast path reported it. */
function resumedCreate(create: NonNullable<Resume["create"]>, timeoutMs: number, command: string, watchdogPid: number | undefined): CommandResult {
  if (create === "timeout") throw new CommandError("ERR_RUNTIME_TIMEOUT", timedOutMessage("RunTimeCreate", timeoutMs, command), "RunTimeCreate");
  if (create === "lost") throw new CommandError("ERR_RUNTIME_COMMAND", `RunTimeCreate: the watchdog (pid ${watchdogPid}) ended without its status: ${command}`, "RunTimeCreate");
  return { code: create, signal: undefined, stdout: "", stderr: "" };
}

/** The message for a RunTimeStart (or the wait after it) that failed in the fast path. */
function resumedStartFailure(resume: Resume, timeoutMs: number, command: string): string {
  const start = resume.start;
  if (start === "timeout") return timedOutMessage("RunTimeStart", timeoutMs, command);
  if (start === 0 || start === undefined) return "the container exited but its exit status is not available (see docs/runtime-oci.md, create/start mode)";
  const result: CommandResult =
    typeof start === "number" ? { code: start, signal: undefined, stdout: "", stderr: "" } : { code: undefined, signal: SIGNALS.get(Number(start.slice(3))) ?? "SIGKILL", stdout: "", stderr: "" };
  return `RunTimeStart ${describeResult(result)}: ${command}`;
}

function signalNumber(sig: NodeJS.Signals): number {
  return constants.signals[sig] ?? 15;
}
