import { ERROR_CATALOG, type ErrorCode, type ErrorParams, catalogEntry, formatTemplate } from "./catalog.js";

export type { ErrorCode } from "./catalog.js";

export interface JobrtErrorDetails {
  /** Runtime type (e.g. "runtime/oci") the error is about, when there is one. */
  runtime?: string;
  /** Hook name for ERR_RUNTIME_HOOK. */
  hook?: string;
  /** File the error was found in (conf parser, config.json, ...). */
  file?: string;
  line?: number;
  column?: number;
  /** The conf key or request field at fault. */
  key?: string;
  /** Package name / path / version for resolution errors. */
  package?: string;
  path?: string;
  version?: string;
  [extra: string]: unknown;
}

/**
 * Marks every JobrtError, so that one thrown by a plugin with its own copy of @jobrt/core (under
 * PluginDir, or another version) is still known as one here: `instanceof` sees only this copy's
 * class, and its code (`details.causeCode`, `--json`'s `causeCode`) would be lost.
 */
const BRAND = Symbol.for("@jobrt/core:JobrtError");

export class JobrtError extends Error {
  readonly code: ErrorCode;
  readonly details: JobrtErrorDetails;

  /** Prefer `jobrtError(code, params)`, which builds the message from the catalog. */
  constructor(code: ErrorCode, message: string, options: JobrtErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "JobrtError";
    this.code = code;
    this.details = options.details ?? {};
    Object.defineProperty(this, BRAND, { value: true });
  }

  get runtime(): string | undefined {
    return this.details.runtime;
  }

  get hook(): string | undefined {
    return this.details.hook;
  }
}

interface JobrtErrorOptions {
  cause?: unknown;
  details?: JobrtErrorDetails;
}

/**
 * The way to raise an error: the message comes from the code's catalog template, filled with
 * `params` (the compiler rejects a missing parameter).
 */
export function jobrtError<C extends ErrorCode>(
  code: C,
  params: ErrorParams<C>,
  options: JobrtErrorOptions = {},
): JobrtError {
  return new JobrtError(code, formatTemplate(ERROR_CATALOG[code].template, params), options);
}

/** The status the CLI exits with when an error with this code stops it. */
export function exitStatusOf(code: string): number {
  return catalogEntry(code)?.exit ?? 1;
}

export function isJobrtError(value: unknown, code?: ErrorCode): value is JobrtError {
  return isBranded(value) && (code === undefined || value.code === code);
}

function isBranded(value: unknown): value is JobrtError {
  if (value instanceof JobrtError) return true;
  if (!(value instanceof Error) || (value as unknown as Record<symbol, unknown>)[BRAND] !== true) return false;
  const { code, details } = value as unknown as Record<string, unknown>;
  return typeof code === "string" && typeof details === "object" && details !== null;
}

/** The message of anything thrown, for one-line reports. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
