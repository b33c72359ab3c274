/**
 * `prefix_merging`: one trace per conversation where the captured tokens allow
 * it, never losing a sampled token to do so (reference §3, hardened):
 * - completions are read in arrival order (order.ts) and grouped into chains
 *   by the prefix relation of their prompts (chains.ts);
 * - an identical-prompt retry replaces the chain's latest answer (recorded);
 * - a member that cannot be joined, or whose logprobs are not aligned, starts
 *   a new trace of the same chain (recorded) instead of being dropped or
 *   nulling the logprobs of the whole chain (merge.ts);
 * - the end-of-turn token comes from config or a tokenizer; auto-detection
 *   is checked before use (eot.ts).
 * Every decision is listed in `metadata.reconstruction_stats`.
 */
import type { CompletionSession, Trajectory } from "../protocol/schemas.ts";
import { qwen3Tokenizer, type ChatTokenizer } from "../tokenizer/qwen3.ts";
import type { Factory } from "../util/registry.ts";
import { groupChains, type Grouping } from "./chains.ts";
import { resolveEot, type EotResolution } from "./eot.ts";
import { extract, type Capture } from "./extract.ts";
import { segmentChain, segmentTrace, type Segment } from "./merge.ts";
import { orderCompletions } from "./order.ts";
import { countCapture } from "./per-request.ts";
import { PrefixMergingConfig } from "./prefix-merging-config.ts";
import { completedTrajectory, emptyStats, emptyTrajectory, type ReconstructionStats } from "./trajectory.ts";
import type { BuilderDeps, TrajectoryBuilder } from "./types.ts";

export { PrefixMergingConfig } from "./prefix-merging-config.ts";
export const NAME = "prefix_merging";

export const prefixMergingFactory: Factory<TrajectoryBuilder, BuilderDeps, typeof PrefixMergingConfig> = {
  name: NAME,
  configSchema: PrefixMergingConfig,
  create: (config, deps) => prefixMergingBuilder(config, deps),
};

export function prefixMergingBuilder(input: Partial<PrefixMergingConfig> = {}, deps: BuilderDeps = {}): TrajectoryBuilder {
  const config = PrefixMergingConfig.parse(input);
  // The tokenizer is loaded on first use, so creating a builder stays cheap.
  const tokenizer = (): ChatTokenizer | undefined => (config.tokenizer === "qwen3" ? qwen3Tokenizer() : deps.tokenizer);
  return { name: NAME, build: (session) => buildPrefixMerging(session, config, tokenizer()) };
}

export function buildPrefixMerging(session: CompletionSession, config: PrefixMergingConfig, tokenizer?: ChatTokenizer): Trajectory {
  const { records, ordering } = orderCompletions(session.completions);
  const stats = emptyStats(ordering, records.length);
  if (records.length === 0) return emptyTrajectory(NAME, session, stats);
  const captures = records.map((r, i) => extract(r, i));
  const eot = resolveEot(captures, knownEot(config, tokenizer), config.detect_end_of_turn);
  const grouping = groupChains(captures, {
    eot: eot.token_id,
    supersededRetries: config.superseded_retries,
    thinkTokenId: thinkToken(tokenizer),
  });
  const segments = grouping.chains.flatMap(segmentChain);
  const traces = segments.map((s, i) => segmentTrace(s, i));
  fillStats(stats, captures, grouping, segments, eot);
  return completedTrajectory(NAME, session, traces, stats);
}

function knownEot(config: PrefixMergingConfig, tokenizer?: ChatTokenizer): { id: number; source: "config" | "tokenizer" } | null {
  if (config.end_of_turn_token_id !== undefined) return { id: config.end_of_turn_token_id, source: "config" };
  if (tokenizer) return { id: tokenizer.eotTokenId, source: "tokenizer" };
  return null;
}

function thinkToken(tokenizer?: ChatTokenizer): number | undefined {
  const ids = tokenizer?.encode("<think>");
  return ids?.length === 1 ? ids[0] : undefined;
}

function fillStats(stats: ReconstructionStats, captures: Capture[], g: Grouping, segments: Segment[], eot: EotResolution): void {
  for (const c of captures) countCapture(c, stats);
  const perChain = new Map<number, number>();
  for (const s of segments) perChain.set(s.chain, (perChain.get(s.chain) ?? 0) + 1);
  stats.chains_total = g.chains.length;
  stats.chains_full = stats.chains_reconstructed_full = [...perChain.values()].filter((n) => n === 1).length;
  stats.chains_split = stats.chains_reconstructed_truncated = stats.chains_total - stats.chains_full;
  stats.traces = segments.length;
  const members = segments.flatMap((s) => s.members);
  stats.completions_merged = members.length;
  stats.sampled_tokens_trainable = members.reduce((n, m) => n + m.capture.sampled.length, 0);
  for (const ch of g.chains) {
    const first = ch.members[0];
    if (first.link.kind === "start") {
      stats.chain_starts.push({ completion_id: first.capture.id, chain: ch.index, reason: first.link.reason, ...first.link.detail });
    }
  }
  for (const s of segments) {
    if (s.splitReason) stats.splits.push({ completion_id: s.members[0].capture.id, chain: s.chain, reason: s.splitReason });
  }
  for (const r of g.retries) {
    stats.retries.push({ completion_id: r.capture.id, chain: r.chain, reason: "identical_prompt_retry", superseded: r.superseded.id });
  }
  for (const d of g.dropped) {
    stats.dropped.push({ completion_id: d.capture.id, chain: d.chain, reason: "superseded_by_retry", superseded_by: d.by.id });
  }
  stats.end_of_turn = eot;
  stats.inserted_end_of_turn = members.filter((m) => m.link.kind === "join" && m.link.insertedEot).map((m) => m.capture.id);
  stats.echo_mismatches = members.filter((m) => m.link.kind === "join" && !m.link.echoMatches).map((m) => m.capture.id);
}
