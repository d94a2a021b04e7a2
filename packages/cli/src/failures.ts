/** What glibc's strsignal(3) says, as srun prints it for a task a signal killed. */
const SIGNAL_TEXT: Record<string, string> = {
  SIGHUP: "Hangup",
  SIGINT: "Interrupt",
  SIGQUIT: "Quit",
  SIGILL: "Illegal instruction",
  SIGTRAP: "Trace/breakpoint trap",
  SIGABRT: "Aborted",
  SIGIOT: "Aborted",
  SIGBUS: "Bus error",
  SIGFPE: "Floating point exception",
  SIGKILL: "Killed",
  SIGUSR1: "User defined signal 1",
  SIGSEGV: "Segmentation fault",
  SIGUSR2: "User defined signal 2",
  SIGPIPE: "Broken pipe",
  SIGALRM: "Alarm clock",
  SIGTERM: "Terminated",
  SIGSTKFLT: "Stack fault",
  SIGCHLD: "Child exited",
  SIGCONT: "Continued",
  SIGSTOP: "Stopped (signal)",
  SIGTSTP: "Stopped",
  SIGTTIN: "Stopped (tty input)",
  SIGTTOU: "Stopped (tty output)",
  SIGURG: "Urgent I/O condition",
  SIGXCPU: "CPU time limit exceeded",
  SIGXFSZ: "File size limit exceeded",
  SIGVTALRM: "Virtual timer expired",
  SIGPROF: "Profiling timer expired",
  SIGWINCH: "Window changed",
  SIGIO: "I/O possible",
  SIGPOLL: "I/O possible",
  SIGPWR: "Power failure",
  SIGSYS: "Bad system call",
};

export interface TaskEnd {
  /** The component of a heterogeneous step (0 otherwise). */
  component: number;
  /** The task's number within its component, as srun numbers it (SLURM_PROCID less the component's first). */
  task: number;
  code: number | null;
  signal: string | null;
  /** The task ended after a SIGINT to jobrt had stopped the step. */
  interrupted?: boolean;
}

/** glibc's words for a signal Node has no name for ("signal 34"): SIGRTMIN is 34 under glibc. */
function unnamedSignal(signal: string): string {
  const n = Number(/^signal (\d+)$/.exec(signal)?.[1]);
  if (n >= 34 && n <= 64) return `Real-time signal ${n - 34}`;
  return `Unknown signal ${Number.isInteger(n) ? n : signal}`;
}

function describeEnd(end: TaskEnd): string | undefined {
  // Node names every signal the table has; anything else is named as Node named it.
  if (end.signal) return SIGNAL_TEXT[end.signal] ?? unnamedSignal(end.signal);
  if (end.code !== null && end.code !== 0) return `Exited with exit code ${end.code}`;
  return undefined;
}

/** "0-2,5" for [0, 1, 2, 5] (ascending), as Slurm prints task lists. */
function ranges(sorted: number[]): string {
  const out: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    out.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return out.join(",");
}

/**
 * srun's lines for the tasks that failed, one per component and outcome, in order of component and
 * then of each outcome's first task: `error: node: task 0: Exited with exit code 3`,
 * `error: node: tasks 1-3,5: Killed`. Tasks that exited 0 get none, and so do tasks a signal ended
 * after a SIGINT to jobrt: srun says nothing of those once Ctrl-C has aborted its step.
 */
export function failureLines(nodeName: string, ends: TaskEnd[]): string[] {
  const groups = new Map<string, { what: string; tasks: number[] }>();
  for (const end of [...ends].sort((a, b) => a.component - b.component || a.task - b.task)) {
    if (end.interrupted && end.signal) continue;
    const what = describeEnd(end);
    if (what === undefined) continue;
    const key = `${end.component} ${what}`;
    const group = groups.get(key);
    if (group) group.tasks.push(end.task);
    else groups.set(key, { what, tasks: [end.task] });
  }
  // A Map keeps insertion order, and the tasks were visited in order.
  return [...groups.values()].map(
    ({ what, tasks }) => `error: ${nodeName}: task${tasks.length > 1 ? "s" : ""} ${ranges(tasks)}: ${what}`,
  );
}
