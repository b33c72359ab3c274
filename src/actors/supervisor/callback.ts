/**
 * Delivers a finished task's TaskResult to its `callback_url` (JSON POST),
 * retrying transport errors and 408/425/429/5xx with backoff. The outcome is
 * recorded in the task's durable state.
 */
import type { Logger } from "pino";
import { errorMessage } from "../../protocol/errors.ts";
import type { TaskResult } from "../../protocol/schemas.ts";
import { sleep } from "../../util/abort.ts";

export interface CallbackOptions {
  attempts: number;
  timeoutMs: number;
  backoffMs: number;
}

export const DEFAULT_CALLBACK: CallbackOptions = { attempts: 5, timeoutMs: 10_000, backoffMs: 250 };

const RETRYABLE = new Set([408, 425, 429]);

export async function postCallback(
  url: string,
  result: TaskResult,
  opts: CallbackOptions,
  log: Logger,
  signal?: AbortSignal,
): Promise<{ delivered: boolean; attempts: number; error: string | null }> {
  const body = JSON.stringify(result);
  let error: string | null = null;
  for (let attempt = 1; attempt <= opts.attempts; attempt++) {
    try {
      const res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
        signal: AbortSignal.timeout(opts.timeoutMs),
      });
      await res.arrayBuffer().catch(() => {});
      if (res.ok) return { delivered: true, attempts: attempt, error: null };
      error = `HTTP ${res.status}`;
      if (!(RETRYABLE.has(res.status) || res.status >= 500)) return { delivered: false, attempts: attempt, error };
    } catch (err) {
      error = errorMessage(err);
    }
    log.warn({ url, attempt, error }, "task callback failed");
    if (attempt < opts.attempts) await sleep(opts.backoffMs * 2 ** (attempt - 1), signal);
  }
  return { delivered: false, attempts: opts.attempts, error };
}
