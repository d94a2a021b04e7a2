import { constants as osConstants } from "node:os";

const SIGNALS = osConstants.signals as Record<string, number>;
const NAMES = new Map(Object.entries(SIGNALS).map(([name, n]) => [n, name]));

/** The number of a signal name or of "signal N" (15 for an unknown one, as for SIGTERM). */
export function signalNumber(signal: NodeJS.Signals | string): number {
  const n = SIGNALS[signal] ?? Number(/^signal (\d+)$/.exec(signal)?.[1]);
  return Number.isInteger(n) && n > 0 ? n : 15;
}

/**
 * How a signal is shown: Node's name for it, else "signal N" as srun words it. Node knows no
 * names for the real-time signals (34-64), which a task can die of all the same.
 */
export function signalName(signo: number): string {
  return NAMES.get(signo) ?? `signal ${signo}`;
}
