/**
 * A finished session as one SFT JSONL line: the conversation as chat
 * messages, and every trace as token ids with a loss mask over the whole
 * sequence (prompt tokens 0, the trace's own mask over the response).
 */
import type { SessionResult } from "../protocol/schemas.ts";

export interface SftLine {
  instance_id: string;
  repo: string;
  task_id: string;
  session_id: string;
  sample_index: number;
  status: string;
  reward: number | null;
  accepted: boolean;
  messages: Array<Record<string, unknown>>;
  samples: Array<{ input_ids: number[]; loss_mask: number[]; prompt_length: number }>;
  error: string | null;
}

/** The session's outcome reward (what the evaluator said, after masking). */
export function rewardOf(r: SessionResult): number | null {
  const ev = r.trajectory.metadata.evaluation as { outcome_reward?: unknown } | undefined;
  return typeof ev?.outcome_reward === "number" ? ev.outcome_reward : null;
}

export function sftLine(r: SessionResult, inst: { instance_id: string; repo: string }, minReward: number): SftLine {
  const reward = rewardOf(r);
  const traces = r.trajectory.traces;
  // The longest conversation: the last trace's prompt plus its answer.
  const last = traces.reduce<(typeof traces)[number] | undefined>((a, t) => (!a || t.prompt_messages.length >= a.prompt_messages.length ? t : a), undefined);
  return {
    instance_id: inst.instance_id,
    repo: inst.repo,
    task_id: r.task_id,
    session_id: r.session_id,
    sample_index: Number(r.metadata.sample_index ?? 0),
    status: r.status,
    reward,
    accepted: r.status === "COMPLETED" && reward !== null && reward >= minReward && traces.length > 0,
    messages: last ? [...last.prompt_messages, ...last.response_messages] : [],
    samples: traces.map((t) => ({
      input_ids: [...t.prompt_ids, ...t.response_ids],
      loss_mask: [...t.prompt_ids.map(() => 0), ...(t.loss_mask.length ? t.loss_mask : t.response_ids.map(() => 1))],
      prompt_length: t.prompt_ids.length,
    })),
    error: r.error,
  };
}
