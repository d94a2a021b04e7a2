import type { DeviceEdits } from "./devices.js";

/**
 * The container request's options: one row per `--container*` option of `jobrt run`, `check` and
 * `exec`. The CLI parses, documents (--help, the man page) and completes them from this table, the
 * `ContainerRequest` type and the fields `meta.accepts` may list are derived from it, and the host's
 * refusal of a field a runtime does not accept names the option from it. A new option is a new row
 * here and code in the runtimes that take it (docs/decisions.md, "One table for the options").
 * Since core 2.1.0.
 */
export interface RequestOption {
  /** The long option, without its dashes: `container-volume`. */
  readonly name: string;
  /** The request field it sets, or `options.KEY` for a shorthand of `--container-opt KEY=VALUE`. */
  readonly field: string;
  /** text: one value; list: repeatable, kept in order; flag: no value; map: repeatable KEY=VALUE. */
  readonly kind: "text" | "list" | "flag" | "map";
  /** What stands for the value in --help (none for a flag). */
  readonly arg?: string;
  /** Its line in `jobrt run --help`; a line break continues under it; repeatable ones say so on their own. */
  readonly help: string;
  /** An empty value is refused (a usage error) rather than sent to the runtime. */
  readonly nonEmpty?: boolean;
  /**
   * The field is in every request, empty when the option is not given. The fields of the first
   * API 2 request are; a field added later is optional, as a request journaled by an older jobrt
   * (a step `jobrt gc` collects after an upgrade) does not have it.
   */
  readonly filled?: boolean;
}

/** Since core 2.1.0. */
export const REQUEST_OPTIONS = [
  {
    name: "container",
    field: "value",
    kind: "text",
    arg: "VALUE",
    nonEmpty: true,
    help: "container for the runtime (oci: bundle path; shifter: image)",
  },
  {
    name: "container-image",
    field: "options.image",
    kind: "text",
    arg: "REF",
    nonEmpty: true,
    help:
      "runtimes oci, charliecloud (any that accepts options.image): run\nfrom an image, pulled and unpacked once per node:\n" +
      "docker://HOST[:PORT]/NAME[:TAG|@sha256:DIGEST], oci:/DIR[:REF],\n" +
      "oci-archive:/FILE[:REF] (same as --container-opt image=REF)",
  },
  {
    name: "container-id",
    field: "options.id",
    kind: "text",
    arg: "ID",
    help: "runtime oci: the containers' name (%I in oci.conf); default\nfor jobrt exec: $SLURM_CONTAINER_ID",
  },
  {
    name: "container-volume",
    field: "volumes",
    kind: "list",
    arg: "V",
    filled: true,
    help: "volume/bind for the runtime",
  },
  { name: "container-module", field: "modules", kind: "list", arg: "M", filled: true, help: "runtime module" },
  {
    name: "container-env",
    field: "env",
    kind: "list",
    arg: "N=V",
    filled: true,
    help: "environment variable set inside the container",
  },
  {
    name: "container-workdir",
    field: "workdir",
    kind: "text",
    arg: "D",
    help: "working directory inside the container",
  },
  {
    name: "container-entrypoint",
    field: "entrypoint",
    kind: "text",
    arg: "P",
    help: "entrypoint inside the container",
  },
  {
    name: "container-clearenv",
    field: "clearEnv",
    kind: "flag",
    filled: true,
    help: "start the container with an empty environment",
  },
  { name: "container-opt", field: "options", kind: "map", arg: "K=V", filled: true, help: "runtime-specific option" },
  {
    name: "container-device",
    field: "devices",
    kind: "list",
    arg: "NAME",
    nonEmpty: true,
    help: "a CDI device: vendor.com/class=name, KIND=all, or\nKIND=gres for the GPUs Slurm allocated",
  },
] as const satisfies readonly RequestOption[];

type Row = (typeof REQUEST_OPTIONS)[number];
/** The rows that set a field of their own (not an `options.KEY` shorthand). */
type FieldRow = Exclude<Row, { field: `options.${string}` }>;
type ValueOf<K extends RequestOption["kind"]> = K extends "text"
  ? string
  : K extends "list"
    ? string[]
    : K extends "flag"
      ? boolean
      : Record<string, string[]>;

/**
 * A job's container request: `--container` (`value`, whose meaning is the runtime's: an OCI bundle
 * path for oci, an image for shifter) plus the runtime options a job may add; `options` holds the
 * free-form `--container-opt key=value` options, for third-party runtimes.
 */
export type ContainerRequest = {
  [R in FieldRow as R extends { filled: true } ? R["field"] : never]: ValueOf<R["kind"]>;
} & {
  [R in FieldRow as R extends { filled: true } ? never : R["field"]]?: ValueOf<R["kind"]>;
} & {
  /**
   * Set by the host, never by the job: the CDI edits of the job's devices and the site's default
   * ones (docs/devices.md). A runtime that applies devices lists `devices` in `meta.accepts`.
   */
  deviceEdits?: DeviceEdits;
};

/** The fields of a ContainerRequest a job can set, each one a `jobrt run` option. */
export type RequestField = FieldRow["field"];

const isFieldRow = (r: Row): r is FieldRow => !r.field.startsWith("options.");

/** The rows that set a field of their own, in table order. */
export const FIELD_OPTIONS: readonly FieldRow[] = REQUEST_OPTIONS.filter(isFieldRow);

export const REQUEST_FIELDS: readonly RequestField[] = FIELD_OPTIONS.map((r) => r.field);

/** A request with no option given: the filled fields empty, nothing else. Since core 2.1.0. */
export function emptyRequest(): ContainerRequest {
  const request: Record<string, unknown> = {};
  for (const r of FIELD_OPTIONS as readonly RequestOption[]) {
    if (r.filled !== true) continue;
    request[r.field] = r.kind === "list" ? [] : r.kind === "flag" ? false : {};
  }
  return request as ContainerRequest;
}
