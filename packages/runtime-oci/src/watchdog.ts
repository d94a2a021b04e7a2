/**
 * The create/start watchdog: a fork of createstart.pl (its `watchdog` sub, no exec), made first.
 * It runs RunTimeCreate itself (with the task's stdio, in its own process group) and then waits,
 * holding nothing of the task but its stderr. If createstart.pl dies without saying
 * goodbye (SIGKILL from the host's KillWait or a second signal, `jobrt gc` killing the task
 * group), the kernel sends the watchdog SIGUSR1 (PR_SET_PDEATHSIG); its teardown runs only after
 * an in-flight create has finished (the signal only marks it until then), and then RunTimeKill and
 * RunTimeDelete, each under its time-out. So:
 * - a created-but-not-started container, whose init holds the task's stdout and stderr, cannot
 *   outlive its task program and keep the host waiting for those pipes for ever;
 * - `runc create` is never killed half-way by a signal to the task's process group (which leaves
 *   runc's state dir and cgroup dirs behind): it finishes, and then the container is deleted;
 * createstart.pl reads create's status from a pipe and kills the watchdog's group when it has torn
 * the container down itself.
 */

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
}
