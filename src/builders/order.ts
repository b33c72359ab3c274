/**
 * The order builders read completions in: the order their answers arrived.
 *
 * When every record carries the proxy's `seq` (arrival order within the
 * session), records are sorted by (`attempt`, `seq`, `completion_id`).
 * Otherwise (sessions captured elsewhere) by the instant of `timestamp`
 * parsed as a date (so "…+00:00" and "…Z" forms compare correctly), then the
 * timestamp string, then `completion_id`; records without a parseable
 * timestamp keep their stored relative order after the dated ones. The sort is
 * stable and never depends on the input order otherwise.
 */
import type { CompletionRecord } from "../protocol/schemas.ts";

export type Ordering = "seq" | "timestamp";

export interface Ordered {
  records: CompletionRecord[];
  ordering: Ordering;
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function orderCompletions(records: readonly CompletionRecord[]): Ordered {
  const all = records.every((r) => typeof r.seq === "number");
  if (all) {
    const sorted = [...records].sort(
      (a, b) => (a.attempt ?? 1) - (b.attempt ?? 1) || a.seq! - b.seq! || byString(a.completion_id, b.completion_id),
    );
    return { records: sorted, ordering: "seq" };
  }
  const keyed = records.map((r, i) => ({ r, i, t: instant(r.timestamp) }));
  keyed.sort((a, b) => {
    if (Number.isNaN(a.t) || Number.isNaN(b.t)) return Number.isNaN(a.t) ? (Number.isNaN(b.t) ? a.i - b.i : 1) : -1;
    return (
      a.t - b.t ||
      byString(a.r.timestamp ?? "", b.r.timestamp ?? "") ||
      byString(a.r.completion_id, b.r.completion_id) ||
      a.i - b.i
    );
  });
  return { records: keyed.map((k) => k.r), ordering: "timestamp" };
}

/** Milliseconds since the epoch, NaN when absent or unparseable. Sub-millisecond digits break ties via the string. */
function instant(ts: string | null | undefined): number {
  if (!ts) return Number.NaN;
  return Date.parse(ts);
}
