import type { NodeConf } from "@jobrt/core";
import type { StepCancel } from "../../cancel.js";
import type { ProcessTracker } from "../proctrack/proctrack.js";
import { type LongTimer, longTimeout } from "./timer.js";

/**
 * How long the task forker has, after the step's SIGKILL, to report its tasks' ends: they are
 * dead, so it takes milliseconds unless it is stopped or wedged (docs/reliability.md).
 */
const FORKER_BOUND_MS = 2000;

/** Delivers a stop signal to one task as its ExecSpec says (supervision.ts, deliverStop). */
export type StopDelivery = (signal: NodeJS.Signals) => void;

/**
 * How a step is stopped: the first cancel request signals every task (as its ExecSpec says:
 * supervision.ts) and arms
 * SIGKILL of the whole step (its cgroup) after KillWait; a second request kills at once; a time
 * limit is a cancel request. `dispose()` ends all of it.
 */
export class StopControl {
  /** Each running task's leader pid and how a stop signal reaches the task. */
  readonly #leaders = new Map<number, StopDelivery>();
  #killTimer: LongTimer | undefined;
  #forkerTimer: NodeJS.Timeout | undefined;
  #afterKill: ((seconds: number) => void) | undefined;
  #timeTimer: LongTimer | undefined;
  readonly #taskTimers = new Set<LongTimer>();
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
  started(pid: number, deliver: StopDelivery): void {
    this.#leaders.set(pid, deliver);
    if (this.cancel.requested) deliver(this.cancel.signal ?? "SIGTERM");
  }

  ended(pid: number): void {
    this.#leaders.delete(pid);
  }

  #kill(pgid: number): void {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      try {
        process.kill(pgid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }

  /** Signals every task now, and SIGKILLs the whole step after KillWait. */
  stopTasks(signal: NodeJS.Signals): void {
    for (const deliver of this.#leaders.values()) deliver(signal);
    this.#killTimer ??= longTimeout(this.node.killWait * 1000, () => this.killAll());
  }

  /**
   * One task was signalled on its own (its joined forker caught it, docs/node-step.md): the signal
   * reaches that task as its ExecSpec says, and a stop signal (`thenKill`) SIGKILLs it after
   * KillWait, as a stop of the step would. Once the step is being stopped, the step's stop has it.
   */
  signalTask(pid: number, signal: NodeJS.Signals, thenKill: boolean): void {
    const deliver = this.#leaders.get(pid);
    if (!deliver || this.cancel.requested) return;
    deliver(signal);
    if (!thenKill) return;
    const timer = longTimeout(this.node.killWait * 1000, () => {
      this.#taskTimers.delete(timer);
      if (this.#leaders.has(pid)) this.#kill(pid);
    });
    this.#taskTimers.add(timer);
  }

  /**
   * `fn` runs FORKER_BOUND_MS after the step's SIGKILL: the task forker, if still there, is killed
   * then, so no stop waits on its reports (a task may have stopped it).
   */
  afterKill(fn: (seconds: number) => void): void {
    this.#afterKill = fn;
  }

  killAll(): void {
    for (const pid of this.#leaders.keys()) this.#kill(pid);
    this.tracker.killAll();
    this.#forkerTimer ??= setTimeout(() => this.#afterKill?.(FORKER_BOUND_MS / 1000), FORKER_BOUND_MS);
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
    clearTimeout(this.#forkerTimer);
    this.#timeTimer?.cancel();
    for (const timer of this.#taskTimers) timer.cancel();
    this.#unsubscribe();
  }
}
