/**
 * Proxy failures as PolarErrors, and their HTTP status. Each dialect renders a
 * failure in its vendor's own error body; this module only decides the class
 * of failure and the status code.
 */
import { PolarError, type ErrorCode } from "../protocol/errors.ts";

export interface ProxyErrorDetails {
  /** HTTP status to answer with, when it differs from the code's default (upstream pass-through). */
  status?: number;
  /** Machine-readable reason, e.g. `invalid_session_credential`, `context_length_exceeded`. */
  reason?: string;
  /** The request field at fault, when known. */
  param?: string;
}

export function proxyError(code: ErrorCode, message: string, details: ProxyErrorDetails = {}, cause?: unknown): PolarError {
  return new PolarError(code, message, { details, cause });
}

export function errorDetails(err: PolarError): ProxyErrorDetails {
  return (err.details ?? {}) as ProxyErrorDetails;
}

export function errorStatus(err: PolarError): number {
  return errorDetails(err).status ?? err.httpStatus;
}

/** Any thrown value as a PolarError (unknown errors become `internal`). */
export function asProxyError(err: unknown): PolarError {
  if (err instanceof PolarError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return proxyError("internal", `internal proxy error: ${message}`, {}, err);
}

const CONTEXT_RE =
  /context length|context_length|context window|maximum context|prompt is too long|too many tokens|exceeds the maximum|longer than the model/i;

/** True when an upstream error message says the prompt did not fit the model's context. */
export function isContextLengthMessage(message: string): boolean {
  return CONTEXT_RE.test(message);
}

/**
 * The requested and allowed token counts in an engine's context-length
 * message, when it names them (vLLM: "maximum context length is L tokens.
 * However, you requested R tokens"; SGLang: "The input (R tokens) is longer
 * than the model's context length (L tokens)").
 */
export function contextNumbers(message: string): { requested?: number; limit?: number } {
  const limit = /context length (?:is |\()?(\d+)/i.exec(message)?.[1];
  const requested = /requested (\d+)|input \((\d+)|(\d+) (?:input )?tokens? (?:>|exceeds)/i.exec(message);
  const r = requested?.slice(1).find((x) => x !== undefined);
  return { requested: r ? Number(r) : undefined, limit: limit ? Number(limit) : undefined };
}
