import { catalogEntry, exitStatusOf, isJobrtError, messageOf } from "@jobrt/core";

/** Exit status for an error that stopped jobrt itself: the catalog's for its code, else 1. */
export function exitCodeFor(error: unknown): number {
  return isJobrtError(error) ? exitStatusOf(error.code) : 1;
}

/** The one line jobrt prints for an error (a stack trace only with -v). */
export function describeError(error: unknown, verbose: number): string {
  if (verbose > 0 && error instanceof Error && error.stack) {
    const hint = isJobrtError(error) ? catalogEntry(error.code)?.hint : undefined;
    const code = isJobrtError(error) ? ` [${error.code}]${hint ? `\nhint: ${hint}` : ""}` : "";
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
