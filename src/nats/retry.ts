/**
 * Transient NATS, JetStream, KV and object-store failures, told apart from
 * permanent ones by their typed nats.js errors, and a retry-with-backoff
 * helper for the supervisor's I/O. A transient error is never taken for a
 * malformed message.
 */
import {
  ConnectionError,
  NoRespondersError,
  RequestError,
  TimeoutError,
  DrainingConnectionError,
} from "@nats-io/transport-node";
import { JetStreamApiCodes, JetStreamApiError, JetStreamError } from "@nats-io/jetstream";
import type { Logger } from "pino";
import { PolarError } from "../protocol/errors.ts";
import { sleep } from "../util/abort.ts";

/** JetStream API codes that mean "try again": no leader, cluster busy, temporarily unavailable. */
const TRANSIENT_API_CODES = new Set<number>([503, 10008 /* cluster not available */, 10076 /* no quorum / not current */]);

export function isTransient(err: unknown): boolean {
  if (err instanceof PolarError) return err.retryable;
  if (err instanceof TimeoutError || err instanceof NoRespondersError || err instanceof RequestError) return true;
  if (err instanceof ConnectionError || err instanceof DrainingConnectionError) return true;
  if (err instanceof JetStreamApiError) return TRANSIENT_API_CODES.has(err.code);
  if (err instanceof JetStreamError) return /timeout|no responders|unavailable/i.test(err.message);
  const cause = (err as { cause?: unknown } | null)?.cause;
  return cause !== undefined && cause !== err && isTransient(cause);
}

/** A CAS write lost to a concurrent one (the key's revision moved). */
export function isWrongRevision(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

export interface RetryOptions {
  attempts?: number;
  baseMs?: number;
  maxMs?: number;
  signal?: AbortSignal;
  log?: Logger;
  what?: string;
}

/** Runs `fn`, retrying transient failures with exponential backoff; permanent ones are thrown at once. */
export async function withRetry<T>(fn: () => Promise<T>, opts: RetryOptions = {}): Promise<T> {
  const attempts = opts.attempts ?? 8;
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= attempts || !isTransient(err) || opts.signal?.aborted) throw err;
      const delay = Math.min(opts.maxMs ?? 5000, (opts.baseMs ?? 100) * 2 ** (i - 1));
      opts.log?.warn({ err: (err as Error).message, attempt: i, delay_ms: delay, what: opts.what }, "transient NATS error; retrying");
      await sleep(delay, opts.signal);
    }
  }
}
