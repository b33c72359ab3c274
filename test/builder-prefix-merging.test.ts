import { describe, expect, it } from "vitest";
import { createBuilderRegistry } from "../src/builders/registry.ts";
import { verifyTrajectory } from "../src/builders/verify.ts";
import type { CompletionRecord, Trajectory } from "../src/protocol/schemas.ts";
import { Trajectory as TrajectorySchema } from "../src/protocol/schemas.ts";
import { hashSeed, lp, record, session } from "./builder-fixtures.ts";

const EOT = 151645;
const registry = createBuilderRegistry();
const build = (records: CompletionRecord[], config: Record<string, unknown> = { end_of_turn_token_id: EOT }) => {
  const s = session(records);
  const t = registry.resolve({ strategy: "prefix_merging", config }, {}).build(s);
  TrajectorySchema.parse(t);
  const v = verifyTrajectory(t, s);
  expect(v.errors).toEqual([]);
  return t;
};
const stats = (t: Trajectory) => t.metadata.reconstruction_stats as Record<string, any>;
const lps = (id: string, n: number) => Array.from({ length: n }, (_, i) => lp(hashSeed(id), i));
const range = (a: number, n: number) => Array.from({ length: n }, (_, i) => a + i);

// POLAR-BUILDER.md §6.
// ChatML: <|im_start|>system\n…<|im_end|>\n<|im_start|>user\n…<|im_end|>\n<|im_start|>assistant\n (17 ids).
const P1 = [151644, 8948, 198, 1000, EOT, 198, 151644, 872, 198, 1001, 1002, 1003, EOT, 198, 151644, 77091, 198];
const TAIL2 = [300, 999, EOT, 198, 151644, 872, 198, 400, 401, EOT, 198, 151644, 77091, 198];
const TAIL3 = [500, 501, EOT, 198, 151644, 872, 198, 600, EOT, 198, 151644, 77091, 198];
const P2 = [...P1, ...TAIL2];
const P3 = [...P2, ...TAIL3];
const P4 = [151644, 872, 198, 2000, 2001, EOT, 198, 151644, 77091, 198];
const worked = () => [
  record({ id: "c1", timestamp: "2026-01-01T00:00:01Z", prompt: P1, sampled: [300, 301, 302, EOT], finish: "tool_calls" }),
  record({ id: "c2", timestamp: "2026-01-01T00:00:02Z", prompt: P2, sampled: [500, 501], finish: "length" }),
  record({ id: "c4", timestamp: "2026-01-01T00:00:02.5Z", prompt: P4, sampled: [800, EOT], finish: "stop" }),
  record({ id: "c3", timestamp: "2026-01-01T00:00:03Z", prompt: P3, sampled: [700, 701, EOT], finish: "stop" }),
];
const WORKED_RESPONSE = [
  300, 301, 302, EOT, 198, 151644, 872, 198, 400, 401, EOT, 198, 151644, 77091, 198, 500, 501, EOT, 198, 151644, 872, 198, 600, EOT, 198,
  151644, 77091, 198, 700, 701, EOT,
];
const WORKED_MASK = "1111 00000000000 11 00000000000 111".replaceAll(" ", "").split("").map(Number);

describe("prefix_merging: the worked example", () => {
  for (const config of [{ end_of_turn_token_id: EOT }, { tokenizer: "qwen3" }, {}]) {
    it(`gives the reference traces (config ${JSON.stringify(config)})`, () => {
      const t = build(worked(), config);
      expect(t.status).toBe("COMPLETED");
      expect(t.traces).toHaveLength(2);
      const [chain, sub] = t.traces;
      expect(chain.prompt_ids).toEqual(P1);
      expect(chain.response_ids).toEqual(WORKED_RESPONSE);
      expect(chain.loss_mask).toEqual(WORKED_MASK);
      const sampledLps = [...lps("c1", 4), ...lps("c2", 2), ...lps("c3", 3)];
      let k = 0;
      expect(chain.response_logprobs).toEqual(WORKED_MASK.map((m) => (m ? sampledLps[k++] : 0)));
      expect(chain.finish_reason).toBe("stop");
      expect(chain.metadata.completion_ids).toEqual(["c1", "c2", "c3"]);
      expect(sub.prompt_ids).toEqual(P4);
      expect(sub.response_ids).toEqual([800, EOT]);
      expect(sub.metadata.completion_ids).toEqual(["c4"]);
      expect(stats(t)).toMatchObject({
        chains_total: 2,
        chains_full: 2,
        chains_reconstructed_full: 2,
        chains_split: 0,
        completions_total: 4,
        completions_merged: 4,
        inserted_end_of_turn: ["c3"],
        end_of_turn: { token_id: EOT, source: "end_of_turn_token_id" in config ? "config" : Object.keys(config).length ? "tokenizer" : "auto" },
      });
      expect(t.metadata).toMatchObject({ builder: "prefix_merging", record_count: 4, trace_count: 2 });
    });
  }
});

describe("prefix_merging: where the reference loses data", () => {
  it("keeps the latest answer of an identical-prompt retry and the rest of the chain", () => {
    const t = build([
      record({ id: "a", seq: 0, prompt: P1, sampled: [300, 301, 302, EOT] }),
      record({ id: "a2", seq: 1, prompt: P1, sampled: [300, 303, EOT] }),
      record({ id: "b", seq: 2, prompt: P2, sampled: [500, 501], finish: "length" }),
      record({ id: "c", seq: 3, prompt: P3, sampled: [700, EOT] }),
    ]);
    expect(t.traces).toHaveLength(1);
    expect(t.traces[0].metadata.completion_ids).toEqual(["a2", "b", "c"]);
    expect(t.traces[0].response_ids.slice(0, 3)).toEqual([300, 303, EOT]);
    expect(t.traces[0].metadata.superseded_completion_ids).toEqual(["a"]);
    expect(stats(t).retries).toEqual([{ completion_id: "a2", chain: 0, reason: "identical_prompt_retry", superseded: "a" }]);
    expect(stats(t).dropped).toEqual([{ completion_id: "a", chain: 0, reason: "superseded_by_retry", superseded_by: "a2" }]);
    expect(stats(t).echo_mismatches).toEqual(["b"]);
  });

  it("can emit superseded retries as traces of their own", () => {
    const t = build(
      [
        record({ id: "a", seq: 0, prompt: P1, sampled: [300, EOT] }),
        record({ id: "a2", seq: 1, prompt: P1, sampled: [301, EOT] }),
        record({ id: "b", seq: 2, prompt: P2, sampled: [500, EOT] }),
      ],
      { end_of_turn_token_id: EOT, superseded_retries: "own_trace" },
    );
    expect(t.traces.map((x) => x.metadata.completion_ids)).toEqual([["a2", "b"], ["a"]]);
    expect(t.traces[1].metadata.chain_start_reason).toBe("superseded_retry");
    expect(stats(t).dropped).toEqual([]);
  });

  it("splits instead of nulling a merged trace's logprobs when one member is unaligned", () => {
    const bad = record({ id: "b", seq: 1, prompt: P2, sampled: [500, 501], finish: "length" });
    (bad.response as any).choices[0].logprobs.content[0].token_id = 4;
    const t = build([
      record({ id: "a", seq: 0, prompt: P1, sampled: [300, 301, 302, EOT] }),
      bad,
      record({ id: "c", seq: 2, prompt: P3, sampled: [700, EOT] }),
    ]);
    expect(t.traces.map((x) => x.metadata.completion_ids)).toEqual([["a"], ["b"], ["c"]]);
    expect(t.traces.map((x) => x.response_logprobs === null)).toEqual([false, true, false]);
    expect(t.traces[1].prompt_ids).toEqual(P2);
    expect(t.traces[2].prompt_ids).toEqual(P3);
    expect(stats(t).splits).toEqual([
      { completion_id: "b", chain: 0, reason: "unaligned_logprobs" },
      { completion_id: "c", chain: 0, reason: "after_unaligned_logprobs" },
    ]);
    expect(stats(t)).toMatchObject({ chains_total: 1, chains_full: 0, chains_split: 1, completions_merged: 3, unaligned_logprobs: ["b"] });
  });

  it("starts a new trace, not a drop, when the tail has no end-of-turn token", () => {
    const t = build([
      record({ id: "a", seq: 0, prompt: P1, sampled: [300, EOT] }),
      record({ id: "b", seq: 1, prompt: [...P1, 5, 6, 7], sampled: [8, EOT] }),
      record({ id: "c", seq: 2, prompt: [...P1, 5, 6, 7, 8, EOT, 9, 10], sampled: [11, EOT] }),
    ]);
    expect(t.traces.map((x) => x.metadata.completion_ids)).toEqual([["a"], ["b", "c"]]);
    expect(t.traces[1].response_ids).toEqual([8, EOT, 9, 10, 11, EOT]);
    expect(t.traces[1].metadata.split_reason).toBe("no_end_of_turn_in_tail");
    expect(stats(t).splits).toEqual([{ completion_id: "b", chain: 0, reason: "no_end_of_turn_in_tail" }]);
  });

  it("orders by the proxy's seq, not by timestamps", () => {
    const recs = worked();
    // Timestamps now claim c3 came first; seq says the true arrival order.
    recs[3].timestamp = "2025-01-01T00:00:00Z";
    recs.forEach((r, i) => (r.seq = i));
    const t = build(recs);
    expect(t.traces[0].response_ids).toEqual(WORKED_RESPONSE);
    expect(stats(t).ordering).toBe("seq");
  });
});

describe("prefix_merging: end-of-turn token", () => {
  it("rejects an auto-detected candidate that prompts do not contain, and merges nothing", () => {
    // Answers stop on a stop string whose last token (77) never closes a turn in the prompts.
    const t = build(
      [
        record({ id: "a", seq: 0, prompt: P1, sampled: [300, 77], finish: "stop" }),
        record({ id: "b", seq: 1, prompt: [...P1, 300, 77, EOT, 9], sampled: [500, 77], finish: "stop" }),
      ],
      {},
    );
    expect(t.traces.map((x) => x.metadata.completion_ids)).toEqual([["a"], ["b"]]);
    expect(stats(t).end_of_turn).toMatchObject({ token_id: null, source: "none", candidate: 77 });
    expect(stats(t).end_of_turn.rejected).toContain("does not contain it");
    expect(stats(t).splits).toEqual([{ completion_id: "b", chain: 0, reason: "end_of_turn_unknown" }]);
  });

  it("rejects a candidate that only a minority of natural stops end with", () => {
    const t = build(
      [
        record({ id: "a", seq: 0, prompt: [1, EOT, 2], sampled: [3, EOT], finish: "stop" }),
        record({ id: "b", seq: 1, prompt: [1, EOT, 4], sampled: [3, 5], finish: "stop" }),
        record({ id: "c", seq: 2, prompt: [1, EOT, 6], sampled: [3, 6], finish: "stop" }),
      ],
      {},
    );
    expect(stats(t).end_of_turn).toMatchObject({ token_id: null, rejected: "only 1 of 3 natural stops end with it" });
  });

  it("takes the token from the tokenizer the caller passes", async () => {
    const { qwen3Tokenizer } = await import("../src/tokenizer/qwen3.ts");
    const s = session(worked());
    const t = registry.resolve({ strategy: "prefix_merging" }, { tokenizer: qwen3Tokenizer() }).build(s);
    expect(stats(t).end_of_turn).toMatchObject({ token_id: EOT, source: "tokenizer", natural_stops: 3, natural_stops_ending_with_eot: 3 });
    expect(t.traces[0].response_ids).toEqual(WORKED_RESPONSE);
  });

  it("uses the configured token over auto-detection and counts answers that do not end with it", () => {
    const t = build([record({ id: "a", seq: 0, prompt: [1, 7, 2], sampled: [3, 7] })], { end_of_turn_token_id: 151643 });
    expect(stats(t).end_of_turn).toMatchObject({ token_id: 151643, source: "config", natural_stops: 1, natural_stops_ending_with_eot: 0 });
  });
});

describe("prefix_merging: chain grouping", () => {
  it("joins the longest tip, separates branches, and says why chains started", () => {
    const base = [1, EOT, 2, EOT, 3];
    const t = build([
      record({ id: "a", seq: 0, prompt: base, sampled: [10, EOT] }),
      record({ id: "sub", seq: 1, prompt: [1, EOT, 2, EOT, 4], sampled: [20, EOT] }),
      record({ id: "b", seq: 2, prompt: [...base, 10, EOT, 5, EOT, 6], sampled: [30, EOT] }),
      // Branches from `a`'s prompt although `b` extended the chain: a new chain.
      record({ id: "br", seq: 3, prompt: [...base, 10, EOT, 7], sampled: [40, EOT] }),
      record({ id: "e", seq: 4, prompt: [], sampled: [50] }),
      record({ id: "u", seq: 5, prompt: [99, EOT], sampled: [60, EOT] }),
      record({ id: "rw", seq: 6, prompt: [1, EOT, 2], sampled: [70, EOT] }),
    ]);
    expect(t.traces.map((x) => x.metadata.completion_ids)).toEqual([["a", "b"], ["sub"], ["br"], ["e"], ["u"], ["rw"]]);
    expect(t.traces[0].response_ids).toEqual([10, EOT, 5, EOT, 6, 30, EOT]);
    expect(stats(t).chain_starts.map((s: any) => [s.completion_id, s.reason])).toEqual([
      ["a", "first"],
      ["sub", "diverged_from_tip"],
      ["br", "diverged_from_tip"],
      ["e", "no_prompt_ids"],
      ["u", "unrelated_prompt"],
      ["rw", "prompt_is_prefix_of_tip"],
    ]);
    expect(stats(t).chain_starts[2]).toMatchObject({ nearest_chain: 0, common_prefix: 7, tip_length: 10 });
  });

  it("handles empty answers by inserting the canonical end-of-turn", () => {
    const t = build([
      record({ id: "a", seq: 0, prompt: [1, EOT, 2], sampled: [] }),
      record({ id: "b", seq: 1, prompt: [1, EOT, 2, EOT, 3, EOT, 4], sampled: [], finish: "stop" }),
      record({ id: "c", seq: 2, prompt: [1, EOT, 2, EOT, 3, EOT, 4, EOT, 5], sampled: [9, EOT] }),
    ]);
    expect(t.traces).toHaveLength(1);
    expect(t.traces[0].response_ids).toEqual([EOT, 3, EOT, 4, EOT, 5, 9, EOT]);
    expect(t.traces[0].loss_mask).toEqual([0, 0, 0, 0, 0, 0, 1, 1]);
    expect(t.traces[0].response_logprobs).toEqual([0, 0, 0, 0, 0, 0, ...lps("c", 2)]);
  });

  it("builds the message view like the reference", () => {
    const sys = { role: "system", content: "s" };
    const u = { role: "user", content: "u" };
    const a1 = { role: "assistant", content: "", tool_calls: [{ id: "1", type: "function", function: { name: "f", arguments: "{}" } }] };
    const tool = { role: "tool", tool_call_id: "1", content: "r" };
    const a2 = { role: "assistant", content: "done" };
    const tools = [{ type: "function", function: { name: "f", parameters: {} } }];
    const t = build([
      record({ id: "a", seq: 0, prompt: P1, sampled: [300, EOT], messages: [sys, u], message: a1, tools, finish: "tool_calls" }),
      record({ id: "b", seq: 1, prompt: P2, sampled: [500, EOT], messages: [sys, u, a1, tool], message: a2, tools }),
    ]);
    expect(t.traces[0].prompt_messages).toEqual([sys, u]);
    expect(t.traces[0].response_messages).toEqual([a1, tool, a2]);
    expect(t.traces[0].tools).toEqual(tools);
    expect(t.traces[0].metadata.completion_metadata).toHaveLength(2);
  });

  it("answers an empty session with an ERROR trajectory", () => {
    const t = registry.resolve({ strategy: "prefix_merging", config: {} }, {}).build(session([], { group_id: "g" }));
    expect(t).toMatchObject({ status: "ERROR", error: "no completions", metadata: { builder: "prefix_merging", group_id: "g" } });
  });
});
