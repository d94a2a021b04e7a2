/**
 * The create/start watchdog: a small `/bin/sh` that the supervisor's perl prefix forks before it
 * execs node. It runs RunTimeCreate itself (with the task's stdio, in its own process group) and
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
import { FAST_PATH, type FastPathSpec, fastPathArgs } from "./fastpath.js";

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

/**
 * $1: the report pipe's fd, $2..$4: create, kill, delete, $5 $6: their time-outs (seconds). A
 * trap that only sets a flag lets dash finish waiting for the foreground create; after it, the
 * trap itself does the teardown, and it is installed before the flag is checked, so no signal
 * can fall between a check and a wait. The commands run under `timeout` when coreutils has it.
 */
const SCRIPT = [
  'fd=$1 create=$2 kill=$3 delete=$4 ks=$5 ds=$6 s= gone=; t=; command -v timeout >/dev/null 2>&1 && t="timeout -s KILL"',
  'stop() { [ -n "$s" ] && kill "$s" 2>/dev/null; [ -z "$kill" ] || $t ${t:+$ks} /bin/sh -c "$kill" >/dev/null 2>&1; [ -z "$delete" ] || $t ${t:+$ds} /bin/sh -c "$delete" >/dev/null 2>&1; exit 0; }',
  "trap 'gone=1' USR1",
  'eval "/bin/sh -c \\"\\$create\\" $fd>&-"; rc=$?',
  "trap stop USR1",
  '[ -z "$gone" ] || stop',
  // A supervisor that died makes the report's write fail: no SIGPIPE for that (create ran with
  // the default disposition, which its container inherits).
  "trap '' PIPE",
  'eval "echo $rc >&$fd" 2>/dev/null; eval "exec $fd>&-"; exec </dev/null >/dev/null',
  "while :; do sleep 3600 & s=$!; wait $s; done",
].join("\n");

const PR_SET_CHILD_SUBREAPER = 36;
const PR_SET_PDEATHSIG = 1;
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
 * argv that makes the following program a child subreaper (the flag survives execve) and execs
 * it; with `watchdog`, it first forks the watchdog (in its own process group, with
 * PR_SET_PDEATHSIG, its pid recorded in the task dir), and with `fast` it then does the
 * supervisor's common path itself (fastpath.ts), starting node only to hand over. Node has no
 * prctl or fork, so this is perl (Debian's perl-base is Essential). JOBRT_OCI_SUBREAPER says
 * whether the prctl worked. Undefined without perl or on an architecture whose prctl number is
 * not listed.
 */
export function supervisorPrefix(
  perl: string | undefined,
  watchdog?: WatchdogSpec,
  fast?: FastPathSpec,
  arch: string = process.arch,
): string[] | undefined {
  const nr = syscallNumbers(["prctl"], arch)?.[0];
  const usr1 = SIGUSR1[arch];
  if (perl === undefined || nr === undefined || usr1 === undefined) return undefined;
  const subreaper = `$ENV{JOBRT_OCI_SUBREAPER} = syscall(${nr}, ${PR_SET_CHILD_SUBREAPER}, 1, 0, 0, 0) == 0 ? 1 : 0;`;
  const exec = `exec { $ARGV[0] } @ARGV; die "jobrt-oci: cannot run $ARGV[0]: $!\\n";`;
  if (!watchdog) return [perl, "-e", `${subreaper} ${exec}`, "--"];
  const fork = [
    "my ($script, $dir, @w) = splice(@ARGV, 0, 7);",
    // Descriptors above $^F get close-on-exec: keep the pipe's ends across exec.
    '$^F = 255; pipe(my $r, my $w) or die "jobrt-oci: pipe: $!\\n"; my $parent = $$;',
    'my $pid = fork() // die "jobrt-oci: fork: $!\\n";',
    `if ($pid == 0) { close $r; delete $ENV{JOBRT_OCI_SUBREAPER}; syscall(${nr}, ${PR_SET_PDEATHSIG}, ${usr1}, 0, 0, 0); exit 0 if getppid() != $parent; setpgrp(0, 0);`,
    ` exec { "/bin/sh" } "/bin/sh", "-c", $script, "${WATCHDOG_NAME}", fileno($w), @w; die "jobrt-oci: cannot run /bin/sh: $!\\n"; }`,
    'close $w; $ENV{JOBRT_OCI_WATCHDOG} = "$pid," . fileno($r);',
    `if (open(my $f, ">", "$dir/.${WATCHDOG_PID_FILE}.$$")) { print $f "$pid\\n"; close $f; rename("$dir/.${WATCHDOG_PID_FILE}.$$", "$dir/${WATCHDOG_PID_FILE}"); }`,
  ].join(" ");
  return [
    perl,
    "-e",
    `${subreaper} ${fork} ${FAST_PATH} ${exec}`,
    "--",
    SCRIPT,
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
