/**
 * Session and agent budgets (POLAR-REFERENCE: the session budget counts from
 * INIT, the agent budget from RUN) and the race of one phase against what is
 * left of them. The clock is injected so the arithmetic is testable with fake
 * timers.
 */
import { PolarError } from "../../protocol/errors.ts";

/** Milliseconds on a monotonic clock. */
export type Clock = () => number;
export const monotonic: Clock = () => performance.now();

/** Milliseconds left of a budget of `seconds` that started at `start` (may be negative). */
export function remainingMs(seconds: number, start: number, now: number): number {
  return seconds * 1000 - (now - start);
}

/** Node's timers overflow above 2^31-1 ms (they then fire at once): longer waits are capped there (~24.8 days). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export function clampDelay(ms: number): number {
  return Number.isFinite(ms) ? Math.min(MAX_TIMER_MS, Math.max(0, ms)) : ms > 0 ? MAX_TIMER_MS : 0;
}

export interface StepBudget {
  /** What the step may take: the smaller of both budgets, at least 1 ms. */
  timeoutMs: number;
  /** Which budget runs out first (the agent's wins a tie). */
  source: "agent" | "session";
}

export function stepBudget(sessionLeftMs: number, agentLeftMs: number): StepBudget {
  return {
    timeoutMs: Math.max(1, Math.min(sessionLeftMs, agentLeftMs)),
    source: agentLeftMs <= sessionLeftMs ? "agent" : "session",
  };
}

/**
 * Races a phase against `ms` and the signal: rejects with a `timeout`
 * PolarError naming `what`, or with the signal's reason. The phase itself is
 * not stopped here; its owner cancels it through the same signal.
 */
export async function budgeted<T>(p: Promise<T>, ms: number, what: string, signal: AbortSignal): Promise<T> {
  const timeout = new PolarError("timeout", `${what} exceeded the session budget`);
  let timer: NodeJS.Timeout | undefined;
  let onAbort = () => {};
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(timeout), clampDelay(ms));
        onAbort = () => reject(signal.reason);
        if (signal.aborted) onAbort();
        else signal.addEventListener("abort", onAbort, { once: true });
      }),
    ]);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", onAbort);
  }
}
