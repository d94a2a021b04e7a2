import { jobrtError } from "./errors.js";
import { runtimeNameOf } from "./names.js";
import { type ContainerRequest, FIELD_OPTIONS, REQUEST_FIELDS, type RequestField } from "./requestoptions.js";

/**
 * What a plugin's `meta.accepts` may list: a request field, or `options.KEY` for one
 * `--container-opt KEY=...` (`options` alone accepts every key).
 */
export type AcceptedField = RequestField | `options.${string}`;

const ACCEPTED_RE = new RegExp(`^(?:${REQUEST_FIELDS.join("|")}|options\\.[A-Za-z0-9][A-Za-z0-9._-]*)$`);

const optionOf = (field: string): string => `--${FIELD_OPTIONS.find((r) => r.field === field)?.name}`;

/** True when `value` is a valid `meta.accepts` list. */
export function isAcceptsList(value: unknown): value is AcceptedField[] {
  return Array.isArray(value) && value.every((f) => typeof f === "string" && ACCEPTED_RE.test(f));
}

/** The request fields a job set, in REQUEST_FIELDS order, with `options` split by key. */
function givenFields(c: ContainerRequest): { field: RequestField; flag: boolean; key?: string; shown: string }[] {
  const out: { field: RequestField; flag: boolean; key?: string; shown: string }[] = [];
  const set: Partial<Record<RequestField, unknown>> = c;
  for (const { field, kind } of FIELD_OPTIONS) {
    const v = set[field];
    if (kind === "text" && typeof v === "string") out.push({ field, flag: false, shown: v });
    if (kind === "list" && Array.isArray(v) && v.length > 0) out.push({ field, flag: false, shown: v[0] as string });
    if (kind === "flag" && v === true) out.push({ field, flag: true, shown: "" });
    if (kind !== "map" || v === undefined) continue;
    for (const [key, values] of Object.entries(v as Record<string, string[]>))
      out.push({ field, flag: false, key, shown: `${key}=${values[0] ?? ""}` });
  }
  return out;
}

function accepted(accepts: readonly string[], field: RequestField, key: string | undefined): boolean {
  return accepts.includes(field) || (key !== undefined && accepts.includes(`options.${key}`));
}

function describeAccepts(accepts: readonly string[]): string {
  if (accepts.length === 0) return "it takes no container options";
  const names = accepts.map((f) =>
    f.startsWith("options.") ? `${optionOf("options")} ${f.slice(8)}=...` : optionOf(f),
  );
  return `it takes ${names.join(", ")}`;
}

/**
 * Refuses a request that sets a field the runtime does not list in `meta.accepts`: one
 * ERR_CONTAINER_REQUEST naming the runtime and the option, before any hook sees the request.
 */
export function checkAccepted(type: string, accepts: readonly string[], request: ContainerRequest | undefined): void {
  if (!request) return;
  const runtime = runtimeNameOf(type);
  for (const g of givenFields(request)) {
    if (accepted(accepts, g.field, g.key)) continue;
    const option = optionOf(g.field);
    const what = g.flag
      ? option
      : `${option} ${JSON.stringify(g.shown.length > 120 ? `${g.shown.slice(0, 120)}...` : g.shown)}`;
    throw jobrtError(
      "ERR_CONTAINER_REQUEST",
      { problem: `${what}: runtime ${runtime} does not accept ${option} (${describeAccepts(accepts)})` },
      {
        details: { runtime: type, key: option },
      },
    );
  }
}
