import { constants } from "node:os";

/** What strsignal(3) says, as srun prints it for a task a signal killed. */
const SIGNAL_TEXT: Record<string, string> = {
  SIGHUP: "Hangup",
  SIGINT: "Interrupt",
  SIGQUIT: "Quit",
  SIGILL: "Illegal instruction",
  SIGTRAP: "Trace/breakpoint trap",
  SIGABRT: "Aborted",
  SIGBUS: "Bus error",
  SIGFPE: "Floating point exception",
  SIGKILL: "Killed",
  SIGUSR1: "User defined signal 1",
  SIGSEGV: "Segmentation fault",
  SIGUSR2: "User defined signal 2",
  SIGPIPE: "Broken pipe",
  SIGALRM: "Alarm clock",
  SIGTERM: "Terminated",
  SIGXCPU: "CPU time limit exceeded",
  SIGXFSZ: "File size limit exceeded",
};

export interface TaskEnd {
  task: number;
  code: number | null;
  signal: string | null;
}

function describeEnd(end: TaskEnd): string | undefined {
  if (end.signal) return SIGNAL_TEXT[end.signal] ?? `Signal ${(constants.signals as Record<string, number>)[end.signal] ?? end.signal}`;
  if (end.code !== null && end.code !== 0) return `Exited with exit code ${end.code}`;
  return undefined;
}

/** "0-2,5" for [0, 1, 2, 5], as Slurm prints task lists. */
function ranges(ids: number[]): string {
  const sorted = [...ids].sort((a, b) => a - b);
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
 * srun's lines for the tasks that failed, one per outcome, in task order: `error: node: task 0: Exited with exit
 * code 3`, `error: node: tasks 1-3: Killed`. Tasks that exited 0 get none.
 */
export function failureLines(nodeName: string, ends: TaskEnd[]): string[] {
  const groups = new Map<string, number[]>();
  for (const end of ends) {
    const what = describeEnd(end);
    if (what) groups.set(what, [...(groups.get(what) ?? []), end.task]);
  }
  // In task order, whatever order the tasks ended in.
  const ordered = [...groups].sort(([, a], [, b]) => Math.min(...a) - Math.min(...b));
  return ordered.map(([what, tasks]) => `error: ${nodeName}: task${tasks.length > 1 ? "s" : ""} ${ranges(tasks)}: ${what}`);
}
