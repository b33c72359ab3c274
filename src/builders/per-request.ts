/**
 * `per_request`: one trace per captured completion, in arrival order, nothing
 * filtered (reference §2). A completion without ids gives an empty trace.
 */
import { z } from "zod";
import type { CompletionSession, Trace, Trajectory } from "../protocol/schemas.ts";
import { extract, promptMessages, requestTools, responseMessages, type Capture } from "./extract.ts";
import { orderCompletions } from "./order.ts";
import { completedTrajectory, emptyStats, emptyTrajectory, type ReconstructionStats } from "./trajectory.ts";
import type { BuilderDeps, TrajectoryBuilder } from "./types.ts";
import type { Factory } from "../util/registry.ts";

export const PerRequestConfig = z.strictObject({});
export type PerRequestConfig = z.infer<typeof PerRequestConfig>;

export const NAME = "per_request";

export function perRequestBuilder(): TrajectoryBuilder {
  return { name: NAME, build: buildPerRequest };
}

export const perRequestFactory: Factory<TrajectoryBuilder, BuilderDeps, typeof PerRequestConfig> = {
  name: NAME,
  configSchema: PerRequestConfig,
  create: () => perRequestBuilder(),
};

export function buildPerRequest(session: CompletionSession): Trajectory {
  const { records, ordering } = orderCompletions(session.completions);
  const stats = emptyStats(ordering, records.length);
  if (records.length === 0) return emptyTrajectory(NAME, session, stats);
  const traces = records.map((r, i) => singleTrace(extract(r, i), i, stats));
  stats.chains_total = stats.chains_full = stats.chains_reconstructed_full = stats.traces = traces.length;
  stats.completions_merged = traces.length;
  return completedTrajectory(NAME, session, traces, stats);
}

/** The trace of one completion alone; also counts it in `stats`. */
export function singleTrace(c: Capture, traceIndex: number, stats: ReconstructionStats): Trace {
  countCapture(c, stats);
  stats.sampled_tokens_trainable += c.sampled.length;
  return {
    prompt_ids: [...c.prompt],
    response_ids: [...c.sampled],
    loss_mask: new Array<0 | 1>(c.sampled.length).fill(1),
    prompt_messages: promptMessages(c),
    response_messages: responseMessages(c),
    tools: requestTools(c),
    finish_reason: c.finishReason,
    response_logprobs: c.logprobs ? [...c.logprobs] : null,
    reward: null,
    reward_components: {},
    metadata: {
      ...c.record.metadata,
      completion_id: c.id,
      completion_ids: [c.id],
      builder_trace_index: traceIndex,
      ...(c.logprobIssue ? { logprob_issue: c.logprobIssue } : {}),
    },
  };
}

/** Adds one completion to the session-wide counters. */
export function countCapture(c: Capture, stats: ReconstructionStats): void {
  stats.sampled_tokens_total += c.sampled.length;
  if (c.prompt.length === 0) stats.missing_prompt_ids.push(c.id);
  if (c.sampled.length === 0) stats.empty_responses.push(c.id);
  if (c.logprobIssue) stats.unaligned_logprobs.push(c.id);
}
