import { type JobrtError, jobrtError } from "@jobrt/core";

/** Shows untrusted text in a message: quoted, control characters escaped, long values cut. */
export function show(text: string): string {
  const cut = text.length > 120 ? `${text.slice(0, 120)}...` : text;
  return JSON.stringify(cut);
}

/**
 * A request the plugin refuses: names the field (the `jobrt run` option, or shifter.conf:line for
 * a site default) and the rule broken. Code ERR_CONTAINER_REQUEST, or ERR_CONTAINER_IMAGE for images.
 */
export function reject(
  field: string,
  value: string,
  rule: string,
  code: "ERR_CONTAINER_REQUEST" | "ERR_CONTAINER_IMAGE" = "ERR_CONTAINER_REQUEST",
): JobrtError {
  return jobrtError(
    code,
    { problem: `${field} ${show(value)}: ${rule}` },
    { details: { runtime: "runtime/shifter", key: field } },
  );
}
