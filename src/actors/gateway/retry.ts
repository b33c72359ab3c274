/**
 * Retrying the gateway's NATS, KV and object-store calls through outages, for
 * as long as a deadline allows (a finished session's result publish waits out
 * an outage of many minutes instead of being re-run). What is transient is
 * decided by the typed nats.js errors (src/nats/retry.ts); a typed PolarError
 * carries its own `retryable`, and a blob not found yet (still replicating)
 * is worth another try; a validation error never is.
 */
import { PolarError, ValidationError } from "../../protocol/errors.ts";
import { isTransient as isTransientNats } from "../../nats/retry.ts";
import { sleep } from "../../util/abort.ts";

export function isTransient(err: unknown): boolean {
  if (err instanceof ValidationError) return false;
  if (err instanceof PolarError) return err.retryable || err.code === "not_found";
  return isTransientNats(err);
}

/** A body that can never be read (bad encoding, failed schema): the only kind of dispatch that is dropped. */
export function isMalformed(err: unknown): boolean {
  return err instanceof ValidationError;
}

/** Delay before retry `n` (1-based): base·2^(n-1), capped, with ±20% jitter. */
export function backoffMs(n: number, baseMs = 200, capMs = 2000, rand: () => number = Math.random): number {
  const d = Math.min(capMs, baseMs * 2 ** Math.max(0, n - 1));
  return Math.round(d * (0.8 + 0.4 * rand()));
}

export interface RetryOptions {
  what: string;
  /** Give up (rethrow the last error) after this long. */
  deadlineMs: number;
  signal?: AbortSignal;
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
  now?: () => number;
}

/** Calls `fn` until it succeeds, the error is not transient, the deadline passes or the signal aborts. */
export async function retrying<T>(fn: () => Promise<T>, o: RetryOptions): Promise<T> {
  const now = o.now ?? Date.now;
  const deadline = now() + o.deadlineMs;
  for (let n = 1; ; n++) {
    try {
      return await fn();
    } catch (err) {
      if (!isTransient(err) || o.signal?.aborted) throw err;
      const delay = backoffMs(n);
      if (now() + delay > deadline) throw err;
      o.onRetry?.(err, n, delay);
      await sleep(delay, o.signal);
    }
  }
}
