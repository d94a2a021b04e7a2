/**
 * The create/start fast path: the common case of the supervisor (supervisor.ts), done by the perl
 * that already starts it (createstart.pl, started as watchdog.ts says), so that no node process
 * starts per task. Starting node
 * was most of create/start's cost over run mode (docs/performance.md, oci-modes).
 *
 * After the watchdog has run RunTimeCreate, the perl reads its status, runs RunTimeQuery once,
 * records the container's pid, runs RunTimeStart with the task's stdio, waits (as the container
 * init's subreaper, with waitpid) for the init to exit, runs RunTimeDelete and exits with the
 * init's status, exactly as the node supervisor does. It forwards SIGTERM/SIGINT/SIGHUP once the
 * container exists (RunTimeKill, then SIGKILL after the grace time).
 *
 * Anything else (a failed or timed-out command, a query that is not a plain `created` answer, a
 * signal before the container started, no subreaper, a pid not ours) is handed over: the perl
 * execs the node supervisor with JOBRT_OCI_RESUME saying how far it got, and node carries on
 * from there with its own messages and teardown. So every unusual path keeps one implementation.
 */

/** Marker the host writes for `%p` in the commands the fast path runs after the pid is known. */
export const PID_PLACEHOLDER = "\u0001jobrt-pid\u0001";

/** What the fast path runs: commands already expanded (with PID_PLACEHOLDER for `%p`). */
export interface FastPathSpec {
  start: string;
  query: string;
  kill: string;
  /** Empty when RunTimeDelete cannot be expanded here (node's teardown would not run it either). */
  delete: string;
  timeouts: { create: number; start: number; query: number; delete: number };
  graceMs: number;
}

/** How far the fast path got before it handed over (JOBRT_OCI_RESUME). */
export interface Resume {
  /** RunTimeCreate's exit status, or how it ended without one. */
  create?: number | "timeout" | "lost";
  /** RunTimeQuery (after a successful create) timed out. */
  query?: "timeout";
  /** The created container's pid (given with `start`). */
  pid?: number;
  /** RunTimeStart's result: exit status, `sig<N>`, or a time-out. */
  start?: number | `sig${number}` | "timeout";
  /** The init exited but its status could not be had. */
  exit?: "unknown";
  signalled?: NodeJS.Signals;
}

/** The perl arguments for the fast path (after the watchdog's), or the one that says "none". */
export function fastPathArgs(spec: FastPathSpec | undefined): string[] {
  if (!spec) return ["0"];
  const t = spec.timeouts;
  return [
    "1",
    spec.start,
    spec.query,
    spec.kill,
    spec.delete,
    ...[t.create, t.start, t.query, t.delete, spec.graceMs].map(String),
    PID_PLACEHOLDER,
  ];
}

/** JOBRT_OCI_RESUME as the fast path writes it (`key=value;...`); undefined for anything else. */
export function parseResume(text: string | undefined): Resume | undefined {
  if (!text) return undefined;
  const r: Resume = {};
  for (const item of text.split(";")) {
    const [key, value = ""] = item.split("=", 2);
    const n = /^\d+$/.test(value) ? Number(value) : undefined;
    if (key === "create" && (n !== undefined || value === "timeout" || value === "lost"))
      r.create = n ?? (value as "timeout" | "lost");
    else if (key === "query" && value === "timeout") r.query = value;
    else if (key === "pid" && n !== undefined && n > 0) r.pid = n;
    else if (key === "start" && (n !== undefined || value === "timeout" || /^sig\d+$/.test(value)))
      r.start = n ?? (value as "timeout");
    else if (key === "exit" && value === "unknown") r.exit = value;
    else if (key === "signalled" && /^SIG[A-Z]+$/.test(value)) r.signalled = value as NodeJS.Signals;
    else return undefined;
  }
  return r;
}
