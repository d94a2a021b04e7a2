import { constants as osConstants } from "node:os";

const SIGNALS = osConstants.signals as Record<string, number>;

/** The number of a signal name (15 for an unknown one, as for SIGTERM). */
export function signalNumber(signal: NodeJS.Signals | string): number {
  return SIGNALS[signal] ?? 15;
}

/** srun's status for one task: its exit code, or 128+N when killed by signal N. */
export function statusOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  if (signal !== null) return 128 + (SIGNALS[signal] ?? 0);
  return 1;
}
