/**
 * Stable error codes. Every code is documented in docs/errors.md; callers and tests match on
 * `code`, never on message text.
 */
export const ErrorCodes = {
  ERR_RUNTIME_NAME: "ERR_RUNTIME_NAME",
  ERR_RUNTIME_NOT_FOUND: "ERR_RUNTIME_NOT_FOUND",
  ERR_RUNTIME_AMBIGUOUS: "ERR_RUNTIME_AMBIGUOUS",
  ERR_RUNTIME_NOT_ALLOWED: "ERR_RUNTIME_NOT_ALLOWED",
  ERR_RUNTIME_INVALID: "ERR_RUNTIME_INVALID",
  ERR_RUNTIME_API_VERSION: "ERR_RUNTIME_API_VERSION",
  ERR_RUNTIME_INIT: "ERR_RUNTIME_INIT",
  ERR_RUNTIME_FINI: "ERR_RUNTIME_FINI",
  ERR_RUNTIME_HOOK: "ERR_RUNTIME_HOOK",
  ERR_RUNTIME_INDEX: "ERR_RUNTIME_INDEX",
  ERR_RUNTIME_CONTRACT: "ERR_RUNTIME_CONTRACT",
  ERR_CONF: "ERR_CONF",
  ERR_CONTAINER_NOT_CONFIGURED: "ERR_CONTAINER_NOT_CONFIGURED",
  ERR_CONTAINER_REQUEST: "ERR_CONTAINER_REQUEST",
  ERR_CONTAINER_IMAGE: "ERR_CONTAINER_IMAGE",
  ERR_RUNTIME_COMMAND: "ERR_RUNTIME_COMMAND",
  ERR_RUNTIME_TIMEOUT: "ERR_RUNTIME_TIMEOUT",
  ERR_USAGE: "ERR_USAGE",
  ERR_LAUNCH: "ERR_LAUNCH",
  ERR_NOT_IN_SLURM_STEP: "ERR_NOT_IN_SLURM_STEP",
  ERR_SPOOL: "ERR_SPOOL",
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

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

export class JobrtError extends Error {
  readonly code: ErrorCode;
  readonly details: JobrtErrorDetails;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; details?: JobrtErrorDetails } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "JobrtError";
    this.code = code;
    this.details = options.details ?? {};
  }

  get runtime(): string | undefined {
    return this.details.runtime;
  }

  get hook(): string | undefined {
    return this.details.hook;
  }
}

export function isJobrtError(value: unknown, code?: ErrorCode): value is JobrtError {
  return value instanceof JobrtError && (code === undefined || value.code === code);
}

/** The message of anything thrown, for one-line reports. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
