import { jobrtError } from "./errors.js";

/** Largest step state a plugin may return, serialized: it is journaled on every step. */
export const MAX_STEP_STATE_BYTES = 1024 * 1024;

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Path of the first value JSON would drop or change (a Map, a function, NaN...), if any. */
function notJson(value: unknown, path: string, seen: Set<object>): string | undefined {
  if (value === null || typeof value === "string" || typeof value === "boolean") return undefined;
  if (typeof value === "number") return Number.isFinite(value) ? undefined : `${path} is ${value}`;
  if (typeof value !== "object") return `${path} is a ${typeof value}`;
  if (seen.has(value)) return `${path} is a cycle`;
  seen.add(value);
  try {
    if (Array.isArray(value)) {
      for (const [i, v] of value.entries()) {
        const bad = notJson(v, `${path}[${i}]`, seen);
        if (bad) return bad;
      }
      return undefined;
    }
    if (!isPlainObject(value)) return `${path} is a ${value.constructor?.name ?? "non-plain object"}`;
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined) continue; // JSON leaves the key out, as an absent optional property
      const bad = notJson(v, `${path}.${k}`, seen);
      if (bad) return bad;
    }
    return undefined;
  } finally {
    seen.delete(value);
  }
}

/**
 * What setup returned, as every later hook will see it: the JSON text the host journals
 * (undefined for no state). A value JSON cannot carry unchanged is a contract error naming where.
 */
export function serializeStepState(runtime: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const bad = notJson(value, "state", new Set());
  const fail = (why: string) =>
    jobrtError(
      "ERR_RUNTIME_CONTRACT",
      {
        problem: `runtime ${runtime} setup returned a step state that ${why}; return plain JSON data (objects, arrays, strings, finite numbers, booleans, null)`,
      },
      {
        details: { runtime, hook: "setup" },
      },
    );
  if (bad) throw fail(`cannot be journaled: ${bad}`);
  const text = JSON.stringify(value);
  if (Buffer.byteLength(text) > MAX_STEP_STATE_BYTES) throw fail(`is over ${MAX_STEP_STATE_BYTES} bytes as JSON`);
  return text;
}
