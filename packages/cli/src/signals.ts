import type { StepCancel } from "@jobrt/launcher";

const FORWARDED: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];

/**
 * Signals cancel the step instead of killing jobrt (cleanup must run). The handlers stay until
 * jobrt exits: a signal after the step ended must not hit the default action and kill jobrt
 * before it reports the step's status.
 */
export function trapSignals(cancel: StepCancel): void {
  for (const sig of FORWARDED) process.on(sig, () => cancel.request(sig));
}
