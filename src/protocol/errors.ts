/**
 * The typed error catalogue. Every error that crosses a boundary (NATS reply,
 * HTTP answer, SessionResult) is a PolarError with a stable `code`, a
 * `retryable` flag, optional structured `details`, and a `cause` chained through
 * ErrorOptions. `toWire()` / `errorFromWire()` let an error survive a NATS hop.
 */

export const ERROR_CODES = {
  validation: { http: 400, retryable: false },
  unknown_strategy: { http: 400, retryable: false },
  payload_too_large: { http: 413, retryable: false },
  unsupported_media_type: { http: 415, retryable: false },
  unauthorized: { http: 401, retryable: false },
  forbidden: { http: 403, retryable: false },
  not_found: { http: 404, retryable: false },
  conflict: { http: 409, retryable: false },
  cancelled: { http: 409, retryable: false },
  timeout: { http: 504, retryable: true },
  upstream: { http: 502, retryable: true },
  upstream_unavailable: { http: 503, retryable: true },
  context_length: { http: 400, retryable: false },
  runtime: { http: 500, retryable: true },
  harness: { http: 500, retryable: false },
  builder: { http: 500, retryable: false },
  evaluator: { http: 500, retryable: false },
  unavailable: { http: 503, retryable: true },
  internal: { http: 500, retryable: false },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface WireError {
  code: ErrorCode;
  message: string;
  retryable: boolean;
  details?: unknown;
  cause?: WireError;
}

export interface PolarErrorOptions extends ErrorOptions {
  details?: unknown;
  retryable?: boolean;
}

export class PolarError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details?: unknown;

  constructor(code: ErrorCode, message: string, opts: PolarErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "PolarError";
    this.code = code;
    this.retryable = opts.retryable ?? ERROR_CODES[code].retryable;
    this.details = opts.details;
  }

  get httpStatus(): number {
    return ERROR_CODES[this.code].http;
  }

  toWire(): WireError {
    const wire: WireError = { code: this.code, message: this.message, retryable: this.retryable };
    if (this.details !== undefined) wire.details = this.details;
    if (this.cause !== undefined) wire.cause = toWireError(this.cause);
    return wire;
  }
}

/** One issue of a failed validation: the dotted path of the bad field and why. */
export interface FieldIssue {
  path: string;
  message: string;
}

export class ValidationError extends PolarError {
  readonly issues: FieldIssue[];
  constructor(what: string, issues: FieldIssue[], opts: ErrorOptions = {}) {
    const list = issues.map((i) => `${i.path || "(root)"}: ${i.message}`).join("; ");
    super("validation", `invalid ${what}: ${list}`, { ...opts, details: { issues } });
    this.name = "ValidationError";
    this.issues = issues;
  }
}

export function isPolarError(err: unknown): err is PolarError {
  return err instanceof PolarError;
}

/** Any thrown value as a wire error; unknown errors become `internal`. */
export function toWireError(err: unknown): WireError {
  if (err instanceof PolarError) return err.toWire();
  if (err instanceof Error) return { code: "internal", message: err.message, retryable: false };
  return { code: "internal", message: String(err), retryable: false };
}

export function errorFromWire(wire: WireError): PolarError {
  const code = (wire.code in ERROR_CODES ? wire.code : "internal") as ErrorCode;
  const cause = wire.cause ? errorFromWire(wire.cause) : undefined;
  if (code === "validation" && isIssueList(wire.details)) {
    const e = new ValidationError("request", wire.details.issues, { cause });
    Object.defineProperty(e, "message", { value: wire.message });
    return e;
  }
  return new PolarError(code, wire.message, { cause, details: wire.details, retryable: wire.retryable });
}

function isIssueList(d: unknown): d is { issues: FieldIssue[] } {
  return typeof d === "object" && d !== null && Array.isArray((d as { issues?: unknown }).issues);
}

/** The message of any thrown value, for logs and result `error` fields. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
