/**
 * Which token closes a turn, for cutting interstitials (reference §3.2, hardened).
 *
 * Sources, in order: the configured `end_of_turn_token_id`; the configured
 * tokenizer; the tokenizer the caller passed; auto-detection. Auto-detection
 * proposes the token that most naturally stopped answers (`stop`,
 * `tool_calls`, `stop_sequence`, `end_turn`) end with, and accepts it only if
 * (1) a strict majority of those answers end with it and (2) it occurs in every
 * non-empty captured prompt (a chat template closes every message with it).
 * A rejected candidate leaves the token unknown: every completion then gets a
 * trace of its own, and the reason is recorded. Nothing is trusted silently.
 */
import type { Capture } from "./extract.ts";

export type EotSource = "config" | "tokenizer" | "auto" | "none";

export interface EotResolution {
  token_id: number | null;
  source: EotSource;
  /** Answers that stopped naturally, and how many of them end with the token. */
  natural_stops: number;
  natural_stops_ending_with_eot: number;
  /** Auto-detection only: the candidate and why it was rejected. */
  candidate?: number;
  rejected?: string;
}

const NATURAL = new Set(["stop", "tool_calls", "stop_sequence", "end_turn"]);

export function resolveEot(captures: readonly Capture[], known: { id: number; source: "config" | "tokenizer" } | null, detect: boolean): EotResolution {
  const votes = new Map<number, number>();
  let natural = 0;
  for (const c of captures) {
    if (!c.finishReason || !NATURAL.has(c.finishReason) || c.sampled.length === 0) continue;
    natural++;
    const last = c.sampled[c.sampled.length - 1];
    votes.set(last, (votes.get(last) ?? 0) + 1);
  }
  if (known) {
    return { token_id: known.id, source: known.source, natural_stops: natural, natural_stops_ending_with_eot: votes.get(known.id) ?? 0 };
  }
  const none = (extra: Partial<EotResolution>): EotResolution => ({
    token_id: null,
    source: "none",
    natural_stops: natural,
    natural_stops_ending_with_eot: 0,
    ...extra,
  });
  if (!detect) return none({ rejected: "auto-detection disabled" });
  let candidate: number | undefined;
  let best = 0;
  for (const [tok, n] of votes) if (n > best) [candidate, best] = [tok, n];
  if (candidate === undefined) return none({ rejected: "no answer stopped naturally" });
  if (best * 2 <= natural) {
    return none({ candidate, rejected: `only ${best} of ${natural} natural stops end with it` });
  }
  const lacking = captures.find((c) => c.prompt.length > 0 && !c.prompt.includes(candidate));
  if (lacking) return none({ candidate, rejected: `prompt of ${lacking.id} does not contain it` });
  return { token_id: candidate, source: "auto", natural_stops: natural, natural_stops_ending_with_eot: best, candidate };
}
