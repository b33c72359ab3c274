/**
 * What happens to a built trajectory after evaluation (POLAR-REFERENCE §5-6):
 * rewards merged into traces, traces with an unparsed tool call zero-rewarded,
 * and non-COMPLETED trajectories masked (reward 0, loss mask zeroed) except
 * the aligned traces of a trainable agent timeout.
 */
import type { AgentRunResult, EvalResult, Trace, Trajectory } from "../../protocol/schemas.ts";

export function mergeEvaluation(traj: Trajectory, evalResult: EvalResult, strategy: string): void {
  const { trace_rewards, outcome_reward } = evalResult;
  if (trace_rewards && trace_rewards.length !== traj.traces.length) {
    traj.status = "ERROR";
    traj.error = `evaluator returned ${trace_rewards.length} trace rewards for ${traj.traces.length} traces`;
  } else if (trace_rewards) {
    traj.traces.forEach((t, i) => (t.reward = trace_rewards[i] ?? null));
  } else if (outcome_reward != null) {
    for (const t of traj.traces) t.reward = outcome_reward;
  }
  const invalid: number[] = [];
  traj.traces.forEach((t, i) => {
    const detail = unparsedToolCall(t);
    if (!detail) return;
    invalid.push(i);
    t.metadata.training_filter = { masked: false, trainable: true, reason: "parser_invalid_tool_call", detail, original_reward: t.reward };
    t.reward = 0;
  });
  traj.metadata.evaluation = {
    strategy,
    outcome_reward,
    trace_rewards,
    ...evalResult.metadata,
    ...(invalid.length ? { parser_invalid_traces_zero_rewarded: invalid } : {}),
  };
}

function unparsedToolCall(t: Trace): string | null {
  const last = [...t.response_messages].reverse().find((m) => m.role === "assistant");
  const calls = last?.tool_calls;
  const hasCalls = Array.isArray(calls) && calls.length > 0;
  if (["tool_calls", "tool_use", "function_call"].includes(t.finish_reason ?? "") && !hasCalls) {
    return `finish_reason ${t.finish_reason} without structured tool calls`;
  }
  const content = typeof last?.content === "string" ? last.content : "";
  if (/<tool_call>|<function=/.test(content)) return "raw tool-call markup in the answer text";
  return null;
}

export interface MaskInput {
  agentResult: AgentRunResult | null;
  evalTimedOut: boolean;
}

/** Masks a trajectory that did not complete; returns the number of traces kept trainable. */
export function maskIncomplete(traj: Trajectory, i: MaskInput): number {
  if (traj.status === "COMPLETED") return traj.traces.length;
  const a = i.agentResult;
  const trainableTimeout =
    traj.status === "TIMEOUT" &&
    a?.status === "timeout" &&
    a.metadata.timeout_source === "agent" &&
    a.metadata.timeout_stage === "exec" &&
    !i.evalTimedOut;
  const reason = trainableTimeout ? "agent_timeout" : traj.status === "TIMEOUT" ? "session_timeout" : "session_error";
  let kept = 0;
  for (const t of traj.traces) {
    const keep = trainableTimeout && aligned(t);
    t.metadata.training_filter = {
      masked: !keep,
      trainable: keep,
      reason: trainableTimeout && !keep ? "agent_timeout_unaligned" : reason,
      detail: traj.error,
      original_reward: t.reward,
    };
    t.reward = 0;
    if (keep) kept++;
    else t.loss_mask = t.loss_mask.map(() => 0);
  }
  const ev = (traj.metadata.evaluation ?? {}) as Record<string, unknown>;
  traj.metadata.evaluation = {
    ...ev,
    discarded_outcome_reward: ev.outcome_reward ?? null,
    discarded_trace_rewards: ev.trace_rewards ?? null,
    outcome_reward: 0,
    trace_rewards: traj.traces.map(() => 0),
    reward: 0,
    resolved: false,
    reward_discarded: true,
    reward_discard_reason: reason,
  };
  return kept;
}

function aligned(t: Trace): boolean {
  const n = t.response_ids.length;
  return (
    n > 0 &&
    t.loss_mask.length === n &&
    t.loss_mask.includes(1) &&
    t.response_logprobs != null &&
    t.response_logprobs.length === n &&
    t.response_logprobs.every(Number.isFinite)
  );
}
