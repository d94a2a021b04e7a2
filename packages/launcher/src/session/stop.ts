import type { NodeConf } from "@jobrt/core";
import type { StepCancel } from "../cancel.js";
import type { ProcessTracker } from "./proctrack.js";
import { type LongTimer, longTimeout } from "./timer.js";

/**
 * How a step is stopped: the first cancel request signals every task's process group and arms
 * SIGKILL of the whole step (its cgroup) after KillWait; a second request kills at once; a time
 * limit is a cancel request. `dispose()` ends all of it.
 */
export class StopControl {
  readonly #leaders = new Set<number>();
  #killTimer: LongTimer | undefined;
  #timeTimer: LongTimer | undefined;
  #unsubscribe: () => void;
  #resolveCancelled: () => void = () => {};
  /** Settles on the first cancel request: a signal must not wait for a slow plugin init. */
  readonly cancelled = new Promise<void>((resolve) => {
    this.#resolveCancelled = resolve;
  });

  constructor(
    readonly cancel: StepCancel,
    readonly node: NodeConf,
    readonly tracker: ProcessTracker,
    onCancel: (signal: NodeJS.Signals) => void,
  ) {
    if (cancel.requested) this.#resolveCancelled();
    this.#unsubscribe = cancel.onRequest((signal, count) => {
      this.#resolveCancelled();
      onCancel(signal);
      if (count === 1) this.stopTasks(signal);
      else this.killAll();
    });
  }

  /** A task's process started: it is signalled with the others from now on. */
  started(pid: number): void {
    this.#leaders.add(pid);
    if (this.cancel.requested) this.#signal(pid, this.cancel.signal ?? "SIGTERM");
  }

  ended(pid: number): void {
    this.#leaders.delete(pid);
  }

  #signal(pgid: number, signal: NodeJS.Signals): void {
    try {
      process.kill(-pgid, signal);
    } catch {
      try {
        process.kill(pgid, signal);
      } catch {
        // already gone
      }
    }
  }

  /** Signals every task now, and SIGKILLs the whole step after KillWait. */
  stopTasks(signal: NodeJS.Signals): void {
    for (const pid of this.#leaders) this.#signal(pid, signal);
    this.#killTimer ??= longTimeout(this.node.killWait * 1000, () => this.killAll());
  }

  killAll(): void {
    for (const pid of this.#leaders) this.#signal(pid, "SIGKILL");
    this.tracker.killAll();
  }

  /** Cancels the step like SIGTERM once `seconds` have passed (srun's -t). */
  limitTime(seconds: number, onExpiry: () => void): void {
    this.#timeTimer = longTimeout(seconds * 1000, () => {
      onExpiry();
      this.cancel.request("SIGTERM", "time limit");
    });
  }

  dispose(): void {
    this.#killTimer?.cancel();
    this.#timeTimer?.cancel();
    this.#unsubscribe();
  }
}
