/** Per-runtime exec timing and outcome counters (ExecStats), by category. */
import type { ExecResult, ExecStats } from "./types.ts";

export class ExecStatsRecorder {
  readonly #s: ExecStats = { count: 0, ms: 0, timeouts: 0, failures: 0, cancelled: 0, exceptions: 0, msByCategory: {}, countByCategory: {} };

  record(category: string | undefined, r: ExecResult): void {
    this.#add(category, r.durationMs);
    if (r.cancelled) this.#s.cancelled++;
    else if (r.timedOut) this.#s.timeouts++;
    else if (r.exitCode !== 0) this.#s.failures++;
  }

  exception(category: string | undefined, ms: number): void {
    this.#add(category, ms);
    this.#s.exceptions++;
  }

  snapshot(): ExecStats {
    return { ...this.#s, msByCategory: { ...this.#s.msByCategory }, countByCategory: { ...this.#s.countByCategory } };
  }

  #add(category: string | undefined, ms: number): void {
    const c = category ?? "other";
    this.#s.count++;
    this.#s.ms += ms;
    this.#s.msByCategory[c] = (this.#s.msByCategory[c] ?? 0) + ms;
    this.#s.countByCategory[c] = (this.#s.countByCategory[c] ?? 0) + 1;
  }
}

/** Runs `fn`, records its result or its exception, and returns/rethrows it. */
export async function timed(stats: ExecStatsRecorder, category: string | undefined, fn: () => Promise<ExecResult>): Promise<ExecResult> {
  const t0 = performance.now();
  try {
    const r = await fn();
    stats.record(category, r);
    return r;
  } catch (e) {
    stats.exception(category, performance.now() - t0);
    throw e;
  }
}
