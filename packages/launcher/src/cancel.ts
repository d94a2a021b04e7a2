/**
 * How a step is told to stop: a signal to jobrt (forwarded to every task) or a time limit. The
 * first request forwards the signal; later ones escalate to SIGKILL at once. Cleanup still runs.
 */
export class StepCancel {
  #signal: NodeJS.Signals | undefined;
  #reason: string | undefined;
  #count = 0;
  #listeners = new Set<(signal: NodeJS.Signals, count: number) => void>();

  get requested(): boolean {
    return this.#count > 0;
  }

  /** The first signal requested (what the exit status reports). */
  get signal(): NodeJS.Signals | undefined {
    return this.#signal;
  }

  get reason(): string | undefined {
    return this.#reason;
  }

  request(signal: NodeJS.Signals, reason = `received ${signal}`): void {
    this.#count++;
    if (this.#signal === undefined) {
      this.#signal = signal;
      this.#reason = reason;
    }
    for (const listener of this.#listeners) listener(signal, this.#count);
  }

  onRequest(listener: (signal: NodeJS.Signals, count: number) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
