/**
 * A trace as the dashboard shows it: every prompt and response token with
 * the text it decodes to on its own, its loss mask and (for sampled tokens)
 * its logprob, plus what the viewer labels: reward, training filter, chain
 * position and why a chain started, side calls. Columnar arrays keep a
 * 50,000-token trace a few hundred KB of JSON.
 */
import type { SessionResult, Trace } from "../protocol/schemas.ts";
import type { ChatTokenizer } from "../tokenizer/qwen3.ts";

export interface DecodedTrace {
  index: number;
  prompt_ids: number[];
  prompt_text: string[];
  response_ids: number[];
  response_text: string[];
  loss_mask: number[];
  response_logprobs: Array<number | null>;
  reward: number | null;
  finish_reason: string | null;
  training_filter: unknown;
  chain: { index: unknown; segment: unknown; start_reason: unknown; split_reason: unknown };
  side: { role: unknown; kind: unknown };
  completion_ids: unknown;
}

export interface DecodedSession {
  task_id: string;
  session_id: string;
  status: string;
  attempt: number;
  node_id: string | null;
  error: string | null;
  reward: number | null;
  builder: unknown;
  timing: Record<string, unknown>;
  traces: DecodedTrace[];
}

export function decodeTrace(tok: ChatTokenizer, t: Trace, index: number): DecodedTrace {
  const m = t.metadata ?? {};
  const text = (ids: number[]) => ids.map((id) => tok.tokenText(id));
  // A trace without a mask trains on nothing (builders always set one for sampled tokens).
  const mask = t.loss_mask.length === t.response_ids.length ? t.loss_mask : t.response_ids.map(() => 0);
  return {
    index,
    prompt_ids: t.prompt_ids,
    prompt_text: text(t.prompt_ids),
    response_ids: t.response_ids,
    response_text: text(t.response_ids),
    loss_mask: mask,
    response_logprobs: t.response_logprobs ?? t.response_ids.map(() => null),
    reward: t.reward,
    finish_reason: t.finish_reason,
    training_filter: m.training_filter ?? null,
    chain: { index: m.chain_index ?? null, segment: m.chain_segment ?? null, start_reason: m.chain_start_reason ?? null, split_reason: m.split_reason ?? null },
    side: { role: m.completion_role ?? null, kind: m.side_kind ?? null },
    completion_ids: m.completion_ids ?? null,
  };
}

export function decodeSession(tok: ChatTokenizer, r: SessionResult): DecodedSession {
  const rewards = r.trajectory.traces.map((t) => t.reward).filter((x): x is number => typeof x === "number");
  return {
    task_id: r.task_id,
    session_id: r.session_id,
    status: r.status,
    attempt: r.attempt,
    node_id: r.node_id,
    error: r.error,
    reward: rewards.length ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null,
    builder: r.trajectory.metadata.builder ?? null,
    timing: r.timing,
    traces: r.trajectory.traces.map((t, i) => decodeTrace(tok, t, i)),
  };
}
