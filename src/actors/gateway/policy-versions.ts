/**
 * Policy versions on a session's result, decided just before it is published:
 * each trace gets the min/max polar policy version of the completions it was
 * built from (and the engine weight versions they reported), and with
 * `max_policy_lag: N` a trace whose oldest completion is more than N versions
 * behind the current version keeps its tokens but is masked out of training
 * (`training_filter.reason: "stale_policy"`). Pure: table-tested.
 */
import type { CompletionRecord, SessionResult, Trace } from "../../protocol/schemas.ts";

export interface VersionSpan {
  min: number;
  max: number;
  engine: string[];
}

export interface PolicyOutcome {
  /** Traces masked because they are too stale. */
  stale: number;
  span: VersionSpan | null;
}

/** The version span of a set of records (null when none carries a version). */
export function versionSpan(records: readonly CompletionRecord[]): VersionSpan | null {
  let min = Infinity;
  let max = -Infinity;
  const engine = new Set<string>();
  for (const r of records) {
    if (typeof r.policy_version === "number") {
      min = Math.min(min, r.policy_version);
      max = Math.max(max, r.policy_version);
    }
    if (typeof r.engine_weight_version === "string") engine.add(r.engine_weight_version);
  }
  return Number.isFinite(min) ? { min, max, engine: [...engine] } : null;
}

/** The records a trace was built from: `metadata.completion_ids`, else every record of the session. */
function traceRecords(t: Trace, byId: Map<string, CompletionRecord>, all: readonly CompletionRecord[]): CompletionRecord[] {
  const ids = t.metadata.completion_ids;
  if (!Array.isArray(ids)) return [...all];
  return ids.map((id) => byId.get(String(id))).filter((r): r is CompletionRecord => r !== undefined);
}

/**
 * Stamps versions on every trace and the trajectory, masks stale traces, and
 * records the counts in `result.metadata` (`policy_version_current`,
 * `max_policy_lag`, `stale_traces`). Mutates the result; returns the outcome.
 */
export function applyPolicyVersions(result: SessionResult, current: number, maxLag: number | null | undefined): PolicyOutcome {
  const records = result.completion_session?.completions ?? [];
  const byId = new Map(records.map((r) => [r.completion_id, r]));
  let stale = 0;
  for (const t of result.trajectory.traces) {
    const span = versionSpan(traceRecords(t, byId, records));
    if (!span) continue;
    t.metadata.policy_version_min = span.min;
    t.metadata.policy_version_max = span.max;
    if (span.engine.length) t.metadata.engine_weight_versions = span.engine;
    if (maxLag == null || current - span.min <= maxLag) continue;
    const filter = t.metadata.training_filter as { masked?: boolean } | undefined;
    if (filter?.masked) continue; // already out of training for another reason
    t.metadata.training_filter = {
      masked: true,
      trainable: false,
      reason: "stale_policy",
      detail: `oldest completion at policy version ${span.min}, ${current - span.min} behind ${current} (max_policy_lag ${maxLag})`,
      original_reward: t.reward,
    };
    t.loss_mask = t.loss_mask.map(() => 0);
    stale++;
  }
  const span = versionSpan(records);
  if (span) {
    result.trajectory.metadata.policy_version_min = span.min;
    result.trajectory.metadata.policy_version_max = span.max;
  }
  result.metadata = {
    ...result.metadata,
    policy_version_current: current,
    ...(maxLag == null ? {} : { max_policy_lag: maxLag }),
    stale_traces: stale,
  };
  return { stale, span };
}
