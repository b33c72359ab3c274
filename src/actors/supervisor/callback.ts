/**
 * Delivers a finished task's TaskResult to its `callback_url` (JSON POST),
 * retrying transport errors and 408/425/429/5xx with backoff. The outcome is
 * recorded in the task's durable state. Every attempt carries the same
 * `Idempotency-Key` header (= the body's `idempotency_key`). The target (and every redirect
 * target) is checked against the callback policy before anything is sent.
 */
import type { Logger } from "pino";
import { errorMessage } from "../../protocol/errors.ts";
import type { TaskResult } from "../../protocol/schemas.ts";
import { HEADERS } from "../../protocol/subjects.ts";
import { sleep } from "../../util/abort.ts";
import { checkCallbackTarget, DEFAULT_CALLBACK_POLICY, type CallbackPolicy } from "../../security/callback-policy.ts";

export interface CallbackOptions {
  attempts: number;
  timeoutMs: number;
  backoffMs: number;
  policy: CallbackPolicy;
}

export const DEFAULT_CALLBACK: CallbackOptions = { attempts: 5, timeoutMs: 10_000, backoffMs: 250, policy: DEFAULT_CALLBACK_POLICY };

const MAX_REDIRECTS = 5;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

class Refused extends Error {}

/** One POST, following redirects only to targets the policy allows (the body is posted again). */
async function postOnce(url: string, body: string, opts: CallbackOptions, headers: Record<string, string>): Promise<Response> {
  let target = url;
  for (let hop = 0; ; hop++) {
    try {
      await checkCallbackTarget(target, opts.policy);
    } catch (err) {
      throw new Refused(errorMessage(err));
    }
    const res = await fetch(target, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
    const location = res.headers.get("location");
    if (!REDIRECTS.has(res.status) || !location) return res;
    await res.arrayBuffer().catch(() => {}); // the redirect's own body is not needed
    if (hop >= MAX_REDIRECTS) throw new Refused(`more than ${MAX_REDIRECTS} redirects`);
    target = new URL(location, target).toString();
  }
}

const RETRYABLE = new Set([408, 425, 429]);

export async function postCallback(
  url: string,
  result: TaskResult,
  opts: CallbackOptions,
  log: Logger,
  signal?: AbortSignal,
): Promise<{ delivered: boolean; attempts: number; error: string | null }> {
  const body = JSON.stringify(result);
  // The same key on every retry of this delivery, so a receiver can drop repeats.
  const headers: Record<string, string> = result.idempotency_key ? { [HEADERS.idempotencyKey]: result.idempotency_key } : {};
  let error: string | null = null;
  for (let attempt = 1; attempt <= opts.attempts; attempt++) {
    try {
      const res = await postOnce(url, body, opts, headers);
      await res.arrayBuffer().catch(() => {}); // only the status matters
      if (res.ok) return { delivered: true, attempts: attempt, error: null };
      error = `HTTP ${res.status}`;
      if (!(RETRYABLE.has(res.status) || res.status >= 500)) return { delivered: false, attempts: attempt, error };
    } catch (err) {
      error = errorMessage(err);
      if (err instanceof Refused) {
        log.warn({ url, error }, "task callback refused by the callback policy");
        return { delivered: false, attempts: attempt, error };
      }
    }
    log.warn({ url, attempt, error }, "task callback failed");
    if (attempt < opts.attempts) await sleep(opts.backoffMs * 2 ** (attempt - 1), signal);
  }
  return { delivered: false, attempts: opts.attempts, error };
}
