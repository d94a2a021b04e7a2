import { constants } from "node:os";

/** Signal number → name, for re-raising the container's death signal on ourselves. */
const SIGNALS = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));

export function signalName(n: number): NodeJS.Signals | undefined {
  return SIGNALS.get(n);
}

export function signalNumber(sig: NodeJS.Signals): number {
  return constants.signals[sig] ?? 15;
}

/** SIGKILL to a process group; one already gone is fine. */
export function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}
