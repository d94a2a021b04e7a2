import { type JobrtError, isJobrtError, jobrtError, messageOf } from "@jobrt/core";

/**
 * How a step is going, shared by the node's step host and its tasks' launch: the first error
 * (the step-end event's), whether a launch failed, how many tasks started.
 */
export class StepOutcome {
  #firstError: JobrtError | undefined;
  #launchFailed = false;
  started = 0;
  readonly #say: (line: string) => void;
  readonly #describe: (error: JobrtError) => string;

  constructor(say: (line: string) => void, describe?: (error: JobrtError) => string) {
    this.#say = say;
    this.#describe = describe ?? ((e: JobrtError) => e.message);
  }

  get firstError(): JobrtError | undefined {
    return this.#firstError;
  }

  get launchFailed(): boolean {
    return this.#launchFailed;
  }

  report = (error: JobrtError): void => {
    this.#firstError ??= error;
    this.#say(this.#describe(error));
  };

  /** A failure that makes the step's status at least 1; a foreign error becomes ERR_LAUNCH. */
  fail = (error: unknown, what: string): void => {
    this.report(launchError(error, what));
    this.#launchFailed = true;
  };
}

/** A launch failure as jobrt reports it: a JobrtError as it is, anything else as ERR_LAUNCH. */
export function launchError(error: unknown, what: string): JobrtError {
  return isJobrtError(error)
    ? error
    : jobrtError("ERR_LAUNCH", { problem: `${what}: ${messageOf(error)}` }, { cause: error });
}
