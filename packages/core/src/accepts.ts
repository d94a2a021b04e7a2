import { jobrtError } from "./errors.js";
import type { ContainerRequest } from "./types.js";

/** The fields of a ContainerRequest a job can set, each one a `jobrt run` option. */
export const REQUEST_FIELDS = ["value", "volumes", "modules", "env", "workdir", "entrypoint", "clearEnv", "options", "devices"] as const;
export type RequestField = (typeof REQUEST_FIELDS)[number];

/**
 * What a plugin's `meta.accepts` may list: a request field, or `options.KEY` for one
 * `--container-opt KEY=...` (`options` alone accepts every key).
 */
export type AcceptedField = RequestField | `options.${string}`;

const OPTION_OF: Record<RequestField, string> = {
  value: "--container",
  volumes: "--container-volume",
  modules: "--container-module",
  env: "--container-env",
  workdir: "--container-workdir",
  entrypoint: "--container-entrypoint",
  clearEnv: "--container-clearenv",
  options: "--container-opt",
  devices: "--container-device",
};

const ACCEPTED_RE = /^(?:value|volumes|modules|env|workdir|entrypoint|clearEnv|options|devices|options\.[A-Za-z0-9][A-Za-z0-9._-]*)$/;

/** True when `value` is a valid `meta.accepts` list. */
export function isAcceptsList(value: unknown): value is AcceptedField[] {
  return Array.isArray(value) && value.every((f) => typeof f === "string" && ACCEPTED_RE.test(f));
}

/** The request fields a job set, in REQUEST_FIELDS order, with `options` split by key. */
function givenFields(c: ContainerRequest): { field: RequestField; key?: string; shown: string }[] {
  const out: { field: RequestField; key?: string; shown: string }[] = [];
  if (c.value !== undefined) out.push({ field: "value", shown: c.value });
  if (c.volumes.length > 0) out.push({ field: "volumes", shown: c.volumes[0] as string });
  if (c.modules.length > 0) out.push({ field: "modules", shown: c.modules[0] as string });
  if (c.env.length > 0) out.push({ field: "env", shown: c.env[0] as string });
  if (c.workdir !== undefined) out.push({ field: "workdir", shown: c.workdir });
  if (c.entrypoint !== undefined) out.push({ field: "entrypoint", shown: c.entrypoint });
  if (c.clearEnv) out.push({ field: "clearEnv", shown: "" });
  if (c.devices !== undefined && c.devices.length > 0) out.push({ field: "devices", shown: c.devices[0] as string });
  for (const [key, values] of Object.entries(c.options)) out.push({ field: "options", key, shown: `${key}=${values[0] ?? ""}` });
  return out;
}

function accepted(accepts: readonly string[], field: RequestField, key: string | undefined): boolean {
  return accepts.includes(field) || (key !== undefined && accepts.includes(`options.${key}`));
}

function describeAccepts(accepts: readonly string[]): string {
  if (accepts.length === 0) return "it takes no container options";
  const names = accepts.map((f) => (f.startsWith("options.") ? `--container-opt ${f.slice(8)}=...` : OPTION_OF[f as RequestField]));
  return `it takes ${names.join(", ")}`;
}

/**
 * Refuses a request that sets a field the runtime does not list in `meta.accepts`: one
 * ERR_CONTAINER_REQUEST naming the runtime and the option, before any hook sees the request.
 */
export function checkAccepted(type: string, accepts: readonly string[], request: ContainerRequest | undefined): void {
  if (!request) return;
  const runtime = type.replace(/^runtime\//, "");
  for (const g of givenFields(request)) {
    if (accepted(accepts, g.field, g.key)) continue;
    const option = OPTION_OF[g.field];
    const what = g.field === "clearEnv" ? option : `${option} ${JSON.stringify(g.shown.length > 120 ? `${g.shown.slice(0, 120)}...` : g.shown)}`;
    throw jobrtError("ERR_CONTAINER_REQUEST", { problem: `${what}: runtime ${runtime} does not accept ${option} (${describeAccepts(accepts)})` }, {
      details: { runtime: type, key: option },
    });
  }
}
