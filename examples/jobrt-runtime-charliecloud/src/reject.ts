import { type JobrtError, jobrtError } from "@jobrt/core";

/** Shows untrusted text in a message: quoted, control characters escaped, long values cut. */
export function show(text: string): string {
  return JSON.stringify(text.length > 120 ? `${text.slice(0, 120)}...` : text);
}

/** A refused request: names the option (or conf file:line) and the rule broken, on one line. */
export function reject(
  field: string,
  value: string,
  rule: string,
  code: "ERR_CONTAINER_REQUEST" | "ERR_CONTAINER_IMAGE" = "ERR_CONTAINER_REQUEST",
): JobrtError {
  return jobrtError(
    code,
    { problem: `${field} ${show(value)}: ${rule}` },
    { details: { runtime: "runtime/charliecloud", key: field } },
  );
}
