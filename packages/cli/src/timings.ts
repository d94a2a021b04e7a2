import type { StepEvent } from "@jobrt/launcher";

/**
 * The phases of one jobrt process in order, each named by the boundary that ends it. A phase whose
 * boundary never came (no setup after a failed runtime load) is counted in the next one that did.
 */
const PHASES = [
  "node",
  "modules",
  "command",
  "config",
  "journal",
  "runtime",
  "setup",
  "spawn",
  "task",
  "cleanup",
  "release",
  "flush",
] as const;
type Phase = (typeof PHASES)[number];

/** The session event that ends each session phase; a repeated event (one per task) moves the end. */
const PHASE_OF_EVENT: Partial<Record<StepEvent["event"], Phase>> = {
  "step-start": "journal",
  runtime: "runtime",
  setup: "setup",
  "task-start": "spawn",
  "task-exit": "task",
  "step-end": "cleanup",
};

/**
 * Where one jobrt process spent its time (`JOBRT_TIMINGS=1`): milliseconds since the process
 * started, as Node's performance clock counts them, cut at the boundaries of docs/performance.md's
 * "Where the time goes in jobrt exec". Made when the entry module's imports have been evaluated.
 */
export class Timings {
  readonly #at = new Map<Phase, number>([["node", performance.nodeTiming.bootstrapComplete]]);

  constructor() {
    this.mark("modules");
  }

  mark(phase: Phase): void {
    this.#at.set(phase, performance.now());
  }

  /** Marks the end of the session phase an event closes (pass it to runSession's onEvent). */
  readonly onEvent = (event: StepEvent): void => {
    const phase = PHASE_OF_EVENT[event.event];
    if (phase) this.mark(phase);
  };

  /** One line: each phase that ended, in ms, and the total. */
  line(): string {
    let last = 0;
    const parts: string[] = [];
    for (const phase of PHASES) {
      const at = this.#at.get(phase);
      if (at === undefined) continue;
      parts.push(`${phase} ${(at - last).toFixed(1)}`);
      last = at;
    }
    return `timings (ms since start): ${parts.join(", ")}; total ${last.toFixed(1)}`;
  }
}
