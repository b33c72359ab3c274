/**
 * `verifyTrajectory(trajectory, session)`: proves the training invariant for
 * every trace, against the raw captured session:
 * - each mask-1 token is a sampled token of one captured completion, with its
 *   exact captured logprob (when the trace has logprobs), in sampling order;
 * - each mask-0 token comes from a captured prompt (the tail of the next
 *   member's prompt beyond the previous member's), with logprob exactly 0;
 * - the trace's prompt is a captured prompt;
 * - no completion's sampled tokens are trainable in two traces, and a
 *   completion whose sampled tokens are trainable in none is listed, with a
 *   reason, in `metadata.reconstruction_stats.dropped`.
 * It never throws for a bad trajectory: `ok` is false and `errors` says where.
 */
import type { CompletionSession, Trajectory } from "../protocol/schemas.ts";
import { extract, type Capture } from "./extract.ts";
import { orderCompletions } from "./order.ts";
import { TraceError, indexCaptures, proveTrace, type CaptureIndex } from "./verify-trace.ts";

export interface VerifyStats {
  traces: number;
  traces_verified: number;
  completions: number;
  /** Completions with at least one sampled token. */
  completions_sampled: number;
  /** Of those, completions trainable in a trace, and dropped with a stated reason. */
  completions_trainable: number;
  completions_dropped: number;
  sampled_tokens_total: number;
  sampled_tokens_trainable: number;
  mask1_tokens: number;
  mask0_tokens: number;
}

export interface VerifyReport {
  ok: boolean;
  errors: string[];
  stats: VerifyStats;
}

export function verifyTrajectory(trajectory: Trajectory, session: CompletionSession): VerifyReport {
  const captures = orderCompletions(session.completions).records.map((r, i) => extract(r, i));
  const stats: VerifyStats = {
    traces: trajectory.traces.length,
    traces_verified: 0,
    completions: captures.length,
    completions_sampled: captures.filter((c) => c.sampled.length > 0).length,
    completions_trainable: 0,
    completions_dropped: 0,
    sampled_tokens_total: captures.reduce((n, c) => n + c.sampled.length, 0),
    sampled_tokens_trainable: 0,
    mask1_tokens: 0,
    mask0_tokens: 0,
  };
  const errors: string[] = [];
  let idx: CaptureIndex;
  try {
    idx = indexCaptures(captures);
  } catch (e) {
    return { ok: false, errors: [(e as Error).message], stats };
  }
  const usedBy = new Map<Capture, number>();
  trajectory.traces.forEach((t, ti) => {
    try {
      const proof = proveTrace(t, idx);
      stats.traces_verified++;
      stats.mask0_tokens += proof.mask0;
      stats.mask1_tokens += proof.mask1;
      for (const c of proof.members) {
        if (c.sampled.length === 0) continue;
        const other = usedBy.get(c);
        if (other !== undefined) errors.push(`trace ${ti}: sampled tokens of ${c.id} are already trainable in trace ${other}`);
        else usedBy.set(c, ti);
      }
    } catch (e) {
      if (!(e instanceof TraceError)) throw e;
      errors.push(`trace ${ti}: ${e.message}`);
    }
  });
  const dropped = droppedIds(trajectory);
  for (const c of captures) {
    if (c.sampled.length === 0) continue;
    if (usedBy.has(c)) {
      stats.completions_trainable++;
      stats.sampled_tokens_trainable += c.sampled.length;
    } else if (dropped.has(c.id)) stats.completions_dropped++;
    else if (stats.traces_verified === stats.traces) {
      errors.push(`completion ${c.id}: its ${c.sampled.length} sampled tokens are trainable in no trace, and reconstruction_stats.dropped does not say why`);
    }
  }
  return { ok: errors.length === 0, errors, stats };
}

function droppedIds(trajectory: Trajectory): Set<string> {
  const rs = trajectory.metadata.reconstruction_stats as { dropped?: unknown } | undefined;
  const list = Array.isArray(rs?.dropped) ? rs.dropped : [];
  const ids = new Set<string>();
  for (const d of list) {
    const r = d as { completion_id?: unknown; reason?: unknown };
    if (typeof r?.completion_id === "string" && typeof r.reason === "string" && r.reason) ids.add(r.completion_id);
  }
  return ids;
}
