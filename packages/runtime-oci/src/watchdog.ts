/**
 * The create/start watchdog: a small `/bin/sh` script (watchdog.sh) that the supervisor's perl
 * prefix (createstart.pl) forks before it execs node. It runs RunTimeCreate itself (with the task's stdio, in its own process group) and
 * then waits, holding nothing of the task but its stderr. If the supervisor dies without saying
 * goodbye (SIGKILL from the host's KillWait or a second signal, `jobrt gc` killing the task
 * group), the kernel sends the watchdog SIGUSR1 (PR_SET_PDEATHSIG); the trap runs only after an
 * in-flight create has finished (a shell runs traps between commands), and then RunTimeKill and
 * RunTimeDelete. So:
 * - a created-but-not-started container, whose init holds the task's stdout and stderr, cannot
 *   outlive its supervisor and keep the host waiting for those pipes for ever;
 * - `runc create` is never killed half-way by a signal to the task's process group (which leaves
 *   runc's state dir and cgroup dirs behind): it finishes, and then the container is deleted;
 * - starting node and creating the container overlap, instead of node's start-up coming first.
 * The supervisor reads create's status from a pipe (`JOBRT_OCI_WATCHDOG=<pid>,<fd>`) and kills the
 * watchdog's group when it has torn the container down itself.
 */

import { syscallNumbers } from "@jobrt/host-services";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type FastPathSpec, fastPathArgs } from "./fastpath.js";

/** Name the watchdog runs under (its $0): cleanup recognises it in /proc/<pid>/cmdline by it. */
export const WATCHDOG_NAME = "jobrt-oci-watchdog";
/** The file in the task dir holding the watchdog's pid, for cleanup to wait on. */
export const WATCHDOG_PID_FILE = "watchdog.pid";

/** What the watchdog runs: expanded commands (Kill/Delete empty when they cannot be expanded without %p). */
export interface WatchdogSpec {
  taskDir: string;
  create: string;
  kill: string;
  delete: string;
  killSeconds: number;
  deleteSeconds: number;
}

const SIGUSR1: Partial<Record<string, number>> = {
  x64: 10,
  arm64: 10,
  riscv64: 10,
  loong64: 10,
  ppc64: 10,
  s390x: 10,
  ia32: 10,
  arm: 10,
};

/**
 * The perl program and the watchdog script, beside this module: src/ and dist/ (the build copies
 * them there). Files, not `-e` and `-c` strings: their own linters and tests see them.
 */
const HERE = dirname(fileURLToPath(import.meta.url));
const CREATESTART_PROGRAM = join(HERE, "createstart.pl");
const WATCHDOG_SCRIPT = join(HERE, "watchdog.sh");

/**
 * argv that runs the following program (the node supervisor) behind createstart.pl: it makes
 * itself a child subreaper (the flag survives execve), forks the watchdog (watchdog.sh, in its own
 * process group, with PR_SET_PDEATHSIG, its pid recorded in the task dir), and with `fast` then
 * does the supervisor's common path itself (fastpath.ts), starting node only to hand over. Node
 * has no prctl or fork, so this is perl (Debian's perl-base is Essential). JOBRT_OCI_SUBREAPER
 * says whether the prctl worked. Undefined without perl or on an architecture whose prctl number
 * is not listed.
 */
export function supervisorPrefix(
  perl: string | undefined,
  watchdog: WatchdogSpec,
  fast?: FastPathSpec,
  arch: string = process.arch,
): string[] | undefined {
  const nr = syscallNumbers(["prctl"], arch)?.[0];
  const usr1 = SIGUSR1[arch];
  if (perl === undefined || nr === undefined || usr1 === undefined) return undefined;
  return [
    perl,
    "-f",
    "--",
    CREATESTART_PROGRAM,
    String(nr),
    String(usr1),
    WATCHDOG_SCRIPT,
    watchdog.taskDir,
    watchdog.create,
    watchdog.kill,
    watchdog.delete,
    String(watchdog.killSeconds),
    String(watchdog.deleteSeconds),
    ...fastPathArgs(fast),
  ];
}

/** `JOBRT_OCI_WATCHDOG=<pid>,<fd>` as the prefix sets it for the supervisor. */
export function parseWatchdogVariable(text: string | undefined): { pid: number; fd: number } | undefined {
  const m = /^(\d+),(\d+)$/.exec(text ?? "");
  return m ? { pid: Number(m[1]), fd: Number(m[2]) } : undefined;
}
