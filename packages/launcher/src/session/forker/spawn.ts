import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { constants as osConstants } from "node:os";
import { type ExecSpec, carriesRawBytes, messageOf } from "@jobrt/core";
import { asUser } from "@jobrt/host-services";
import { moveToForkerCgroup } from "./forkercgroup.js";
import { type AfterDeath, type StdioItem, TaskForker, type TaskProcess, forkerPerl } from "./forker.js";
import type { ProcessTracker } from "../proctrack/proctrack.js";

/** How a task's process starts, besides its ExecSpec and its stdio. */
export interface TaskStartOptions {
  /** Run as this user and group (only when the host is root and they are not root's). */
  user?: { uid: number; gid: number };
  /** Where the process is tracked; without one it has only its own process group. */
  tracker?: ProcessTracker;
}

/** Said once per jobrt process: every step would say the same. */
let saidNoForker = false;

/**
 * The one spawn path: the session, the testkit and the runtimes' own tests all start tasks here,
 * so what they test is what sites run. Each task starts with its ExecSpec's argv, env and cwd, in
 * a new session and process group, as the step's user, born inside its task cgroup, with exactly
 * fds 0, 1 and 2 and those its stdio array passes on purpose (pmi.ts). A step's tasks are forked
 * by one TaskForker (forker.ts), which sees their raw wait status; without perl, Node's spawn
 * starts them and a real-time signal's death reads as exit 0 (docs/reliability.md, "Known gaps").
 */
export class TaskSpawner {
  readonly #forker: TaskForker | undefined;
  readonly #stdios: Map<number, StdioItem[]>;

  /**
   * `stdios`: every task's stdio by task id, known before the first task starts; `afterDeath`:
   * what the forker runs if jobrt dies while tasks run; `forkerCgroup`: the cgroup (made now) the
   * forker is born in (forkercgroup.ts); `joined`: a joined task's own forker (the spawner of that
   * one task, docs/node-step.md) instead of one started here.
   */
  constructor(
    stdios: Map<number, StdioItem[]>,
    warn: (line: string) => void,
    afterDeath?: AfterDeath,
    forkerCgroup?: string,
    joined?: TaskForker,
  ) {
    this.#stdios = stdios;
    if (joined) {
      this.#forker = joined;
      return;
    }
    const found = forkerPerl();
    if ("perl" in found) this.#forker = startForker(found.perl, stdios, warn, afterDeath, forkerCgroup);
    else if (!saidNoForker) {
      saidNoForker = true;
      warn(
        `tasks are started by Node (${found.missing}): a task killed by a real-time signal (34-64) is reported as exit 0`,
      );
    }
  }

  /** Starts task `taskId`; resolves once its process runs, rejects when it could not be started. */
  start(taskId: number, spec: ExecSpec, options: TaskStartOptions = {}): Promise<TaskProcess> {
    if (spec.argv[0] === undefined) throw new Error("spawnTaskProcess: empty argv");
    const stdio = this.#stdios.get(taskId);
    if (!stdio) throw new Error(`no stdio for task ${taskId}`);
    const { tracker, user } = options;
    if (this.#forker) {
      const cgroupProcs = tracker?.taskCgroup(taskId);
      return this.#forker.start(taskId, spec, { ...(user ? { user } : {}), ...(cgroupProcs ? { cgroupProcs } : {}) });
    }
    let dir: number | undefined;
    try {
      dir = user ? openDirAs(user, spec.cwd) : undefined;
    } catch (error) {
      return Promise.reject(chdirError(spec.cwd, error as NodeJS.ErrnoException));
    }
    try {
      // The child enters the directory the user opened: Node's spawn does chdir(2) before it drops
      // to the user, so the user's own path must not reach it (docs/reliability.md, "Threat model").
      const start = () => nodeSpawn(dir === undefined ? spec : { ...spec, cwd: `/proc/self/fd/${dir}` }, stdio, user);
      return started(tracker ? tracker.startInside(taskId, start) : start());
    } finally {
      if (dir !== undefined) closeSync(dir);
    }
  }

  /** The task forker's pid, if tasks are started by one. */
  get forkerPid(): number | undefined {
    return this.#forker?.pid;
  }

  /** The step's SIGKILL was `seconds` ago and the forker is still there: it is SIGKILLed too. */
  killForker(seconds: number): void {
    this.#forker?.kill(`had not reported its tasks' ends ${seconds} s after the step's SIGKILL (stopped?): killed`);
  }

  /** Every task has been started (or never will be); resolves once the forker, if any, is reaped. */
  close(): Promise<void> {
    return this.#forker?.close() ?? Promise.resolve();
  }
}

function startForker(
  perl: string,
  stdios: Map<number, StdioItem[]>,
  warn: (line: string) => void,
  afterDeath?: AfterDeath,
  cgroup?: string,
): TaskForker | undefined {
  try {
    const forker = new TaskForker(perl, stdios, warn, afterDeath);
    if (cgroup && forker.pid !== undefined) moveToForkerCgroup(cgroup, forker.pid, warn);
    return forker;
  } catch (error) {
    warn(
      `tasks are started by Node (${messageOf(error)}): a task killed by a real-time signal (34-64) is reported as exit 0`,
    );
    return undefined;
  }
}

/** O_PATH | O_DIRECTORY on Linux (generic and x86 tables): a handle to enter, nothing to read. */
const O_PATH_DIRECTORY = 0o10000000 | 0o200000;

/**
 * Opens `dir` with the user's rights, as its chdir(2) would resolve it: "<dir>/." needs search
 * permission on the directory itself, as chdir does. Close-on-exec (Node's own), yet still open
 * in the forked child until its exec.
 */
function openDirAs(user: { uid: number; gid: number }, dir: string): number {
  return asUser(user, () => openSync(`${dir}/.`, O_PATH_DIRECTORY));
}

/** The error of a task whose directory cannot be entered, as the forker reports it. */
function chdirError(dir: string, cause: NodeJS.ErrnoException): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error(`chdir: ${cause.code}`);
  error.code = cause.code ?? "EACCES";
  error.syscall = "chdir";
  error.path = dir;
  return error;
}

function nodeSpawn(spec: ExecSpec, stdio: StdioItem[], user: TaskStartOptions["user"]): ChildProcess {
  const [file, ...args] = spec.argv;
  // Node's spawn writes strings as UTF-8: a byte that is not would reach the task altered.
  const raw = [...spec.argv, ...Object.entries(spec.env).flat()].find(carriesRawBytes);
  if (raw !== undefined)
    throw new Error(
      `${JSON.stringify(raw.slice(0, 60))} holds bytes that are not UTF-8, which only the task forker (perl) passes unchanged`,
    );
  return spawn(file!, args, {
    cwd: spec.cwd,
    env: spec.env,
    stdio,
    detached: true,
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
  });
}

/** Node's spawn reports a failed exec as an 'error' event; a started child as 'spawn'. */
function started(child: ChildProcess): Promise<TaskProcess> {
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("spawn", () => {
      child.off("error", reject);
      // Node reports an end as a code or a signal's name, never the wait status: made one here,
      // once, before any other listener sees the end (a real-time signal has no name: exit 0).
      child.once("exit", (code, signal) => {
        const signo = signal === null ? undefined : (osConstants.signals as Record<string, number>)[signal];
        (child as { waitStatus?: number | null }).waitStatus =
          code !== null ? (code & 0xff) << 8 : signo !== undefined ? signo : null;
      });
      // Its later 'error's (a failed kill) are nothing the host acts on; unheard they would crash it.
      child.on("error", () => {});
      // ChildProcess is a TaskProcess whose signals all have names.
      resolve(child as unknown as TaskProcess);
    });
  });
}

/** Starts one task with a spawner of its own (createTaskGroup: the testkit, runtime-oci's test host). */
export function spawnTaskProcess(
  spec: ExecSpec,
  options: TaskStartOptions & { stdio: StdioItem[]; taskId: number },
): Promise<TaskProcess> {
  const spawner = new TaskSpawner(new Map([[options.taskId, options.stdio]]), (line) =>
    process.stderr.write(`jobrt: warning: ${line}\n`),
  );
  try {
    return spawner.start(options.taskId, spec, options);
  } finally {
    // The forker exits after the task; nothing here waits for that.
    void spawner.close();
  }
}

/** The user a root host drops to for a step's tasks, if any. */
export function dropTo(hostUid: number, uid: number, gid: number): { uid: number; gid: number } | undefined {
  return hostUid === 0 && (uid !== 0 || gid !== 0) ? { uid, gid } : undefined;
}
