/**
 * Property tests over sessions rendered with the real Qwen3 template and
 * tokenizer (builder-qwen3-sessions.ts): for every generated session both
 * builders' trajectories pass the verifier, every sampled token is trainable in
 * exactly one trace (or the statistics say why not), merged traces follow one
 * conversation turn by turn, and append-only sessions give one trace per
 * conversation.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createBuilderRegistry } from "../src/builders/registry.ts";
import { verifyTrajectory } from "../src/builders/verify.ts";
import { isPrefix } from "../src/builders/prefix-hash.ts";
import { Trajectory as TrajectorySchema, type Trajectory } from "../src/protocol/schemas.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";
import { anySession, appendOnlySession, generate, type Generated } from "./builder-qwen3-sessions.ts";

const registry = createBuilderRegistry();
const tok = qwen3Tokenizer();
const RUNS = Number(process.env.BUILDER_PROPERTY_RUNS ?? 50);
const SPLIT_REASONS = new Set(["unaligned_logprobs", "after_unaligned_logprobs", "no_end_of_turn_in_tail", "end_of_turn_unknown"]);

function sampledIds(g: Generated, id: string): number[] {
  const r = g.session.completions.find((c) => c.completion_id === id)!;
  return ((r.response as any).choices[0].token_ids ?? []) as number[];
}

/** Each completion with sampled ids: trainable in exactly one trace, or listed in `dropped`. */
function expectExactlyOnce(g: Generated, t: Trajectory, own: boolean): void {
  const where = new Map<string, number[]>();
  t.traces.forEach((tr, i) => (tr.metadata.completion_ids as string[]).forEach((id) => where.set(id, [...(where.get(id) ?? []), i])));
  const drops = (t.metadata.reconstruction_stats as any).dropped as { completion_id: string; superseded_by: string }[];
  const dropped = new Set(drops.map((d) => d.completion_id));
  const prompt = (id: string) => (g.session.completions.find((c) => c.completion_id === id)!.response as any).prompt_token_ids;
  // Only an answer to a prompt that was sent again, identically, is ever left out.
  for (const d of drops) expect(prompt(d.superseded_by)).toEqual(prompt(d.completion_id));
  if (!own) for (const [id, o] of g.origins) if (o.superseded) expect(dropped.has(id)).toBe(true);
  let trainable = 0;
  for (const r of g.session.completions) {
    const n = sampledIds(g, r.completion_id).length;
    const traces = where.get(r.completion_id) ?? [];
    if (n === 0) continue;
    if (dropped.has(r.completion_id)) {
      expect(traces).toEqual([]);
    } else {
      expect(traces).toHaveLength(1);
      trainable += n;
    }
  }
  const mask1 = t.traces.reduce((n, tr) => n + tr.loss_mask.filter((m) => m === 1).length, 0);
  expect(mask1).toBe(trainable);
  expect((t.metadata.reconstruction_stats as any).sampled_tokens_trainable).toBe(trainable);
}

/** Members of a merged trace: one conversation, consecutive answered steps, prompts extending each other. */
function expectConversationOrder(g: Generated, t: Trajectory): void {
  for (const tr of t.traces) {
    const ids = tr.metadata.completion_ids as string[];
    const o = ids.map((id) => g.origins.get(id)!);
    for (let i = 1; i < o.length; i++) {
      expect(o[i].conv).toBe(o[0].conv);
      expect(o[i].step).toBe(o[i - 1].step + 1);
    }
    if (tr.response_logprobs) tr.loss_mask.forEach((m, i) => m === 0 && expect(tr.response_logprobs![i]).toBe(0));
  }
}

function buildAndProve(g: Generated, config: Record<string, unknown>): Trajectory {
  const t = registry.resolve({ strategy: "prefix_merging", config }, {}).build(g.session);
  TrajectorySchema.parse(t);
  const v = verifyTrajectory(t, g.session);
  expect(v.errors).toEqual([]);
  expectExactlyOnce(g, t, config.superseded_retries === "own_trace");
  expectConversationOrder(g, t);
  return t;
}

function appendOnly(g: Generated): boolean {
  const last = new Map<number, number[]>();
  for (const r of g.session.completions) {
    const o = g.origins.get(r.completion_id)!;
    const p = (r.response as any).prompt_token_ids as number[];
    const prev = last.get(o.conv);
    if (prev && !isPrefix(prev, p)) return false;
    last.set(o.conv, p);
  }
  return true;
}

describe("builders on generated Qwen3 sessions", () => {
  it("prefix_merging and per_request are proven, lossless and conversation-faithful on any session", () => {
    fc.assert(
      fc.property(anySession, (spec) => {
        const g = generate(spec);
        const t = buildAndProve(g, { tokenizer: "qwen3" });
        const stats = t.metadata.reconstruction_stats as any;
        expect(stats.end_of_turn).toMatchObject({ token_id: tok.eotTokenId, source: "tokenizer" });
        for (const s of stats.splits) expect(SPLIT_REASONS.has(s.reason)).toBe(true);
        // A conversation's later step starts a new chain only where its history was rewritten.
        for (const s of stats.chain_starts) {
          if (g.origins.get(s.completion_id)!.step > 0) expect(s.reason).toBe("diverged_from_tip");
        }
        expect(stats.completions_merged + stats.dropped.length).toBe(g.session.completions.length);
        expect(stats.chains_total).toBeGreaterThanOrEqual(g.conversations);
        // Unaligned members sit in traces without logprobs; the others keep theirs.
        for (const tr of t.traces) {
          const anyUnaligned = (tr.metadata.completion_ids as string[]).some((id) => stats.unaligned_logprobs.includes(id));
          const anySampled = tr.loss_mask.includes(1);
          expect(tr.response_logprobs === null).toBe(anyUnaligned || !anySampled);
        }
        const own = buildAndProve(g, { tokenizer: "qwen3", superseded_retries: "own_trace" });
        expect((own.metadata.reconstruction_stats as any).dropped).toEqual([]);
        expect(own.traces.length).toBe(t.traces.length + stats.retries.length);
        // Auto-detection agrees with the tokenizer wherever it accepts a token.
        const auto = buildAndProve(g, {});
        const eot = (auto.metadata.reconstruction_stats as any).end_of_turn;
        if (eot.token_id !== null) expect(eot.token_id).toBe(tok.eotTokenId);

        const p = registry.resolve({ strategy: "per_request" }, {}).build(g.session);
        expect(verifyTrajectory(p, g.session).errors).toEqual([]);
        expect(p.traces).toHaveLength(g.session.completions.length);
      }),
      { numRuns: RUNS },
    );
  });

  it("append-only sessions give one trace per conversation", () => {
    fc.assert(
      fc.property(appendOnlySession, (spec) => {
        const g = generate(spec);
        expect(appendOnly(g)).toBe(true);
        for (const config of [{ tokenizer: "qwen3" }, { end_of_turn_token_id: tok.eotTokenId }]) {
          const t = buildAndProve(g, config);
          expect(t.traces).toHaveLength(g.conversations);
          expect((t.metadata.reconstruction_stats as any)).toMatchObject({ chains_total: g.conversations, chains_full: g.conversations, chains_split: 0 });
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("records why a new user query that strips reasoning starts a new chain", () => {
    const g = generate({
      convs: [
        [
          { kind: "tool", think: true, length: false, retry: false, compact: false, unaligned: false, drift: false, words: 4, seed: 1 },
          { kind: "text", think: true, length: false, retry: false, compact: false, unaligned: false, drift: false, words: 4, seed: 2 },
          { kind: "text", think: false, length: false, retry: false, compact: false, unaligned: false, drift: false, words: 4, seed: 3 },
        ],
      ],
      schedule: [0],
    });
    const t = buildAndProve(g, { tokenizer: "qwen3" });
    expect(t.traces.map((x) => x.metadata.completion_ids)).toEqual([["c0s0-0", "c0s1-1"], ["c0s2-2"]]);
    const start = (t.metadata.reconstruction_stats as any).chain_starts[1];
    expect(start).toMatchObject({ reason: "diverged_from_tip", reasoning_stripped: true, nearest_chain: 0 });
  });
});
