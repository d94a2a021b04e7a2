import { jobrtError } from "@jobrt/core";

/**
 * Parses a Slurm time limit (`-t`): minutes, minutes:seconds, hours:minutes:seconds, days-hours,
 * days-hours:minutes, days-hours:minutes:seconds; 0, INFINITE and UNLIMITED mean none.
 * Returns seconds, or undefined for no limit.
 */
export function parseTimeLimit(text: string): number | undefined {
  const t = text.trim();
  if (/^(infinite|unlimited)$/i.test(t)) return undefined;
  const bad = (): never => {
    throw jobrtError("ERR_USAGE", {
      problem: `invalid time limit ${JSON.stringify(text)}: use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS`,
    });
  };
  const m = /^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$/.exec(t);
  if (!m) bad();
  const [, days, a, b, c] = m as RegExpExecArray;
  const n = (s: string | undefined) => (s === undefined ? 0 : Number(s));
  let seconds: number;
  if (days !== undefined) {
    // D-HH[:MM[:SS]]
    seconds = n(days) * 86400 + n(a) * 3600 + n(b) * 60 + n(c);
  } else if (c !== undefined) {
    seconds = n(a) * 3600 + n(b) * 60 + n(c);
  } else if (b !== undefined) {
    seconds = n(a) * 60 + n(b);
  } else {
    seconds = n(a) * 60;
  }
  if (!Number.isSafeInteger(seconds)) bad();
  return seconds === 0 ? undefined : seconds;
}
