import { type ErrorCode, JobrtError } from "@jobrt/core";

/** Shows untrusted text in a message: quoted, control characters escaped, long values cut. */
export function show(text: string): string {
  return JSON.stringify(text.length > 120 ? `${text.slice(0, 120)}...` : text);
}

/** A refused request: names the option (or conf file:line) and the rule broken, on one line. */
export function reject(field: string, value: string, rule: string, code: ErrorCode = "ERR_CONTAINER_REQUEST"): JobrtError {
  return new JobrtError(code, `${field} ${show(value)}: ${rule}`, { details: { runtime: "runtime/charliecloud", key: field } });
}
