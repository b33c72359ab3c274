/**
 * What every builder's Trajectory carries besides its traces: the session's
 * identity, scheduler keys, and reconstruction statistics.
 */
import type { CompletionSession, Trace, Trajectory } from "../protocol/schemas.ts";
import type { Ordering } from "./order.ts";

/** Why a chain was started, split, or a completion left out. */
export interface ChainEvent {
  completion_id: string;
  /** Index of the chain the event belongs to. */
  chain: number;
  reason: string;
  [detail: string]: unknown;
}

/**
 * Reconstruction statistics (`trajectory.metadata.reconstruction_stats`).
 * `chains_reconstructed_full` / `chains_reconstructed_truncated` keep the
 * reference's names; here "truncated" counts chains emitted as several traces
 * (nothing is dropped), the same number as `chains_split`.
 */
export interface ReconstructionStats {
  ordering: Ordering;
  completions_total: number;
  /** Completions whose sampled tokens are in some trace. */
  completions_merged: number;
  chains_total: number;
  chains_full: number;
  chains_split: number;
  chains_reconstructed_full: number;
  chains_reconstructed_truncated: number;
  traces: number;
  sampled_tokens_total: number;
  sampled_tokens_trainable: number;
  /** Completions with sampled ids but no aligned logprobs (their trace has `response_logprobs: null`). */
  unaligned_logprobs: string[];
  /** Completions without prompt ids. */
  missing_prompt_ids: string[];
  empty_responses: string[];
  /** Identical-prompt retries: the later answer replaced the earlier one. */
  retries: ChainEvent[];
  /** Where chains started (and why they did not continue an existing chain). */
  chain_starts: ChainEvent[];
  /** Where a chain was cut into several traces, and why. */
  splits: ChainEvent[];
  /** Completions whose sampled tokens are in no trace, and why. */
  dropped: ChainEvent[];
  [extra: string]: unknown;
}

export function emptyStats(ordering: Ordering, completions: number): ReconstructionStats {
  return {
    ordering,
    completions_total: completions,
    completions_merged: 0,
    chains_total: 0,
    chains_full: 0,
    chains_split: 0,
    chains_reconstructed_full: 0,
    chains_reconstructed_truncated: 0,
    traces: 0,
    sampled_tokens_total: 0,
    sampled_tokens_trainable: 0,
    unaligned_logprobs: [],
    missing_prompt_ids: [],
    empty_responses: [],
    retries: [],
    chain_starts: [],
    splits: [],
    dropped: [],
  };
}

const SCHEDULER_KEYS = ["group_id", "policy_version", "rollout_step"] as const;

/** Trajectory metadata common to every builder (reference §2), scheduler keys last in a fixed order. */
export function trajectoryMetadata(
  builder: string,
  session: CompletionSession,
  traces: number,
  stats: ReconstructionStats,
): Record<string, unknown> {
  const meta: Record<string, unknown> = {
    builder,
    session_id: session.session_id,
    task_id: session.task_id ?? null,
    api_type: session.api_type ?? null,
    model_requested: session.model_requested ?? null,
    model_used: session.model_used ?? null,
    record_count: session.completions.length,
    task_metadata: { ...session.metadata },
    trace_count: traces,
    reconstruction_stats: stats,
  };
  for (const k of SCHEDULER_KEYS) if (k in session.metadata) meta[k] = session.metadata[k];
  return meta;
}

/** The reference's answer to a session without completions. */
export function emptyTrajectory(builder: string, session: CompletionSession, stats: ReconstructionStats): Trajectory {
  return { status: "ERROR", error: "no completions", traces: [], metadata: trajectoryMetadata(builder, session, 0, stats) };
}

export function completedTrajectory(
  builder: string,
  session: CompletionSession,
  traces: Trace[],
  stats: ReconstructionStats,
): Trajectory {
  return { status: "COMPLETED", error: null, traces, metadata: trajectoryMetadata(builder, session, traces.length, stats) };
}
