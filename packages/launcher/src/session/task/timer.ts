/** Node's timers hold at most 2^31-1 ms (about 24.8 days); a longer delay fires at once. */
const MAX_DELAY_MS = 2 ** 31 - 1;

export interface LongTimer {
  cancel(): void;
}

/**
 * Calls `fn` after `ms` milliseconds, for any delay a Slurm time limit can express: long delays
 * wait in steps below Node's limit. The timer never keeps the process alive on its own.
 */
export function longTimeout(ms: number, fn: () => void): LongTimer {
  const due = Date.now() + ms;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    const left = due - Date.now();
    if (left <= 0) {
      timer = undefined;
      fn();
      return;
    }
    timer = setTimeout(arm, Math.min(left, MAX_DELAY_MS));
    timer.unref();
  };
  arm();
  return {
    cancel() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
