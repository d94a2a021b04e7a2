import { isJobrtError, messageOf } from "@jobrt/core";

const USAGE_CODES = new Set([
  "ERR_USAGE",
  "ERR_CONF",
  "ERR_RUNTIME_NAME",
  "ERR_RUNTIME_NOT_ALLOWED",
  "ERR_RUNTIME_NOT_FOUND",
  "ERR_RUNTIME_AMBIGUOUS",
  "ERR_NOT_IN_SLURM_STEP",
]);

/** Exit status for an error that stopped jobrt itself: 2 for usage/configuration, else 1. */
export function exitCodeFor(error: unknown): number {
  return isJobrtError(error) && USAGE_CODES.has(error.code) ? 2 : 1;
}

/** The one line jobrt prints for an error (a stack trace only with -v). */
export function describeError(error: unknown, verbose: number): string {
  if (verbose > 0 && error instanceof Error && error.stack) {
    const code = isJobrtError(error) ? ` [${error.code}]` : "";
    let text = `${error.message}${code}\n${error.stack}`;
    let cause = (error as { cause?: unknown }).cause;
    while (cause instanceof Error) {
      text += `\ncaused by: ${cause.stack ?? cause.message}`;
      cause = (cause as { cause?: unknown }).cause;
    }
    return text;
  }
  return messageOf(error).replace(/\s*\n\s*/g, " ");
}
