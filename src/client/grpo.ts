/** GRPO's group-relative advantages and the group a trainer consumes. */
import type { SessionSummary, TaskState } from "../protocol/schemas.ts";
import type { Group, GroupSession, TraceMessage } from "./types.ts";

const EPS = 1e-6;

/**
 * (r - mean) / (std + 1e-6) over the group (population std); with
 * `normalizeStd: false`, just r - mean. A group of one gets advantage 0.
 */
export function grpoAdvantages(rewards: readonly number[], normalizeStd = true): number[] {
  if (rewards.length === 0) return [];
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  const centred = rewards.map((r) => r - mean);
  if (!normalizeStd) return centred;
  const std = Math.sqrt(centred.reduce((a, c) => a + c * c, 0) / rewards.length);
  return centred.map((c) => c / (std + EPS));
}

/** True when the trace was masked out for being produced by a too-old policy. */
export function isStale(m: TraceMessage): boolean {
  const t = m.trace as { training_filter?: { reason?: string }; metadata?: { training_filter?: { reason?: string } } };
  return (t.training_filter?.reason ?? t.metadata?.training_filter?.reason) === "stale_policy";
}

/** Session reward for GRPO: mean trace reward, 0 for a session without rewarded traces. */
export function sessionReward(traces: readonly TraceMessage[]): number {
  const rs = traces.map((m) => m.trace.reward).filter((r): r is number => typeof r === "number");
  return rs.length ? rs.reduce((a, b) => a + b, 0) / rs.length : 0;
}

/** Builds the group from the task's final session summaries and every trace it published. */
export function buildGroup(
  taskId: string,
  status: TaskState,
  sessions: readonly SessionSummary[],
  traces: readonly TraceMessage[],
  normalizeStd = true,
): Group {
  const bySession = new Map<string, TraceMessage[]>();
  for (const m of traces) bySession.set(m.session_id, [...(bySession.get(m.session_id) ?? []), m]);
  const ordered = [...sessions].sort((a, b) => a.sample_index - b.sample_index);
  const out: GroupSession[] = ordered.map((s) => {
    const ts = (bySession.get(s.session_id) ?? []).sort((a, b) => a.trace_index - b.trace_index);
    return { session_id: s.session_id, sample_index: s.sample_index, status: s.status, attempt: s.attempt, reward: sessionReward(ts), advantage: 0, traces: ts };
  });
  const adv = grpoAdvantages(out.map((s) => s.reward), normalizeStd);
  out.forEach((s, i) => (s.advantage = adv[i]));
  return { task_id: taskId, status, sessions: out, stale_traces: traces.filter(isStale).length };
}
