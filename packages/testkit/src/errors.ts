import { isJobrtError } from "@jobrt/core";

export interface CodedError {
  code: string;
  message: string;
}

/**
 * The error as a JobrtError, or undefined. A plugin may bundle or resolve its own copy of
 * @jobrt/core, so besides `instanceof` an error named "JobrtError" with an ERR_ code counts.
 */
export function asJobrtError(error: unknown): CodedError | undefined {
  if (isJobrtError(error)) return error;
  if (error instanceof Error && error.name === "JobrtError") {
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string" && /^ERR_[A-Z0-9_]+$/.test(code)) return { code, message: error.message };
  }
  return undefined;
}

/** One line about anything thrown: its code when it has one, its class, its message. */
export function describeThrown(error: unknown): string {
  const coded = asJobrtError(error);
  if (coded) return `JobrtError ${coded.code}: ${coded.message}`;
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return `${error.name}${typeof code === "string" ? ` ${code}` : ""} (not a JobrtError): ${error.message}`;
  }
  return `${typeof error} ${String(error)} (not a JobrtError)`;
}
