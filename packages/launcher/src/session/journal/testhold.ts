import { closeSync, constants, openSync } from "node:fs";

/**
 * A test-only hook (tests/hostile/gcjournal.test.ts): with $JOBRT_TEST_GC_HOLD naming a FIFO,
 * gc stops right before it removes a collected entry until the test opens that FIFO for reading,
 * so the test can swap a directory at that racy moment every time instead of now and then. The
 * FIFO gone means no hold; unset (always, outside that test) it costs one environment lookup.
 */
export function holdForTest(): void {
  const fifo = process.env.JOBRT_TEST_GC_HOLD;
  if (!fifo) return;
  try {
    closeSync(openSync(fifo, constants.O_WRONLY));
  } catch {
    // the test removed it: no hold
  }
}
