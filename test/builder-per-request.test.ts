import { describe, expect, it } from "vitest";
import { createBuilderRegistry } from "../src/builders/registry.ts";
import { PolarError, ValidationError } from "../src/protocol/errors.ts";
import { Trajectory } from "../src/protocol/schemas.ts";
import { hashSeed, lp, record, session } from "./builder-fixtures.ts";

const registry = createBuilderRegistry();
const perRequest = () => registry.resolve({ strategy: "per_request" }, {});

describe("builder registry", () => {
  it("registers per_request and prefix_merging", () => {
    expect(registry.names()).toEqual(["per_request", "prefix_merging"]);
  });

  it("rejects unknown config keys with the field named", () => {
    expect(() => registry.resolve({ strategy: "per_request", config: { x: 1 } }, {})).toThrow(ValidationError);
    expect(() => registry.check({ strategy: "prefix_merging", config: { tokenizer_name_or_path: "q" } })).toThrow(/config/);
    expect(() => registry.check({ strategy: "prefix_merging", config: { end_of_turn_token_id: 1.5 } })).toThrow(
      /end_of_turn_token_id/,
    );
    expect(registry.check({ strategy: "prefix_merging", config: { end_of_turn_token_id: 151645, tokenizer: "qwen3" } })).toMatchObject({
      end_of_turn_token_id: 151645,
      tokenizer: "qwen3",
    });
  });

  it("names the known builders for an unknown strategy", () => {
    try {
      registry.resolve({ strategy: "nope" }, {});
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(PolarError);
      expect((e as PolarError).code).toBe("unknown_strategy");
      expect((e as PolarError).message).toContain("per_request, prefix_merging");
    }
  });

  it("accepts a custom builder by name with its own schema", async () => {
    const { z } = await import("zod");
    const reg = createBuilderRegistry();
    reg.register({
      name: "count",
      configSchema: z.strictObject({ label: z.string() }),
      create: (cfg: { label: string }) => ({
        name: "count",
        build: (s) => ({ status: "COMPLETED", error: null, traces: [], metadata: { label: cfg.label, n: s.completions.length } }),
      }),
    });
    expect(() => reg.resolve({ strategy: "count", config: {} }, {})).toThrow(/label/);
    const b = reg.resolve({ strategy: "count", config: { label: "x" } }, {});
    expect(b.build(session([])).metadata).toEqual({ label: "x", n: 0 });
  });
});

describe("per_request", () => {
  it("gives one lossless trace per completion, in seq order, with exact ids and logprobs", () => {
    const a = record({ id: "a", seq: 1, timestamp: "2026-01-01T00:00:09Z", prompt: [1, 2, 3], sampled: [10, 11, 12], finish: "tool_calls" });
    const b = record({ id: "b", seq: 0, timestamp: "2026-01-01T00:00:10Z", prompt: [5, 6], sampled: [20, 21], shape: "sglang" });
    const t = perRequest().build(session([a, b], { group_id: "g", rollout_step: 3, other: 1 }));
    Trajectory.parse(t);
    expect(t.status).toBe("COMPLETED");
    expect(t.traces.map((x) => x.metadata.completion_id)).toEqual(["b", "a"]);
    const [tb, ta] = t.traces;
    expect(tb.prompt_ids).toEqual([5, 6]);
    expect(tb.response_ids).toEqual([20, 21]);
    expect(tb.loss_mask).toEqual([1, 1]);
    expect(tb.response_logprobs).toEqual([lp(hashSeed("b"), 0), lp(hashSeed("b"), 1)]);
    expect(ta.response_ids).toEqual([10, 11, 12]);
    expect(ta.response_logprobs).toEqual([0, 1, 2].map((i) => lp(hashSeed("a"), i)));
    expect(ta.finish_reason).toBe("tool_calls");
    expect(ta.prompt_messages).toEqual([{ role: "user", content: "prompt a" }]);
    expect(ta.response_messages).toEqual([{ role: "assistant", content: "answer a" }]);
    expect(ta.metadata).toMatchObject({ session_id: "s1", completion_role: "policy", completion_ids: ["a"], builder_trace_index: 1 });
    expect(t.metadata).toMatchObject({
      builder: "per_request",
      session_id: "s1",
      task_id: "t1",
      api_type: "openai",
      model_requested: "m",
      model_used: "m-served",
      record_count: 2,
      trace_count: 2,
      group_id: "g",
      rollout_step: 3,
      reconstruction_stats: { ordering: "seq", completions_total: 2, completions_merged: 2, traces: 2, sampled_tokens_total: 5, sampled_tokens_trainable: 5 },
    });
    expect(t.metadata).not.toHaveProperty("policy_version");
  });

  it("orders by parsed timestamps when seq is missing (not by string order)", () => {
    // As strings "…00:00:05+02:00" > "…00:00:04Z", but it is two hours earlier.
    const a = record({ id: "a", timestamp: "2026-01-01T00:00:04Z", prompt: [1], sampled: [2] });
    const b = record({ id: "b", timestamp: "2026-01-01T00:00:05+02:00", prompt: [1], sampled: [3] });
    const t = perRequest().build(session([a, b]));
    expect(t.traces.map((x) => x.metadata.completion_id)).toEqual(["b", "a"]);
    expect((t.metadata.reconstruction_stats as { ordering: string }).ordering).toBe("timestamp");
  });

  it("nulls only the logprobs of a record whose logprobs do not align, and says so", () => {
    const good = record({ id: "g", seq: 0, prompt: [1], sampled: [7, 8] });
    const bad = record({ id: "x", seq: 1, prompt: [1], sampled: [7, 8] });
    // One logprob entry names a different token: not aligned.
    (bad.response as any).choices[0].logprobs.content[1].token_id = 9;
    const none = record({ id: "n", seq: 2, prompt: [1], sampled: [7], logprobs: null });
    const t = perRequest().build(session([good, bad, none]));
    expect(t.traces.map((x) => x.response_logprobs === null)).toEqual([false, true, true]);
    expect(t.traces[1].loss_mask).toEqual([1, 1]);
    expect(t.traces[1].metadata.logprob_issue).toBe("logprobs not aligned with token_ids");
    expect(t.traces[2].metadata.logprob_issue).toBe("no logprobs");
    expect((t.metadata.reconstruction_stats as any).unaligned_logprobs).toEqual(["x", "n"]);
  });

  it("takes ids and logprobs from SGLang meta_info when token_ids are absent", () => {
    const r = record({ id: "s", seq: 0, prompt: [4, 5], sampled: [30, 31, 32], shape: "sglang" });
    const t = perRequest().build(session([r]));
    expect(t.traces[0].response_ids).toEqual([30, 31, 32]);
    expect(t.traces[0].response_logprobs).toEqual([0, 1, 2].map((i) => lp(hashSeed("s"), i)));
    expect(t.traces[0].prompt_ids).toEqual([4, 5]);
  });

  it("accepts positional logprobs.content without token ids only when the counts match", () => {
    const r = record({ id: "p", seq: 0, prompt: [1], sampled: [40, 41] });
    for (const e of (r.response as any).choices[0].logprobs.content) delete e.token_id;
    const short = record({ id: "q", seq: 1, prompt: [1], sampled: [40, 41] });
    (short.response as any).choices[0].logprobs.content.pop();
    for (const e of (short.response as any).choices[0].logprobs.content) delete e.token_id;
    const t = perRequest().build(session([r, short]));
    expect(t.traces[0].response_logprobs).toEqual([lp(hashSeed("p"), 0), lp(hashSeed("p"), 1)]);
    expect(t.traces[1].response_logprobs).toBeNull();
  });

  it("keeps records without ids as empty traces", () => {
    const r = record({ id: "e", seq: 0, prompt: [], sampled: null, logprobs: null, finish: "length" });
    const t = perRequest().build(session([r]));
    expect(t.traces).toHaveLength(1);
    expect(t.traces[0]).toMatchObject({ prompt_ids: [], response_ids: [], loss_mask: [], response_logprobs: null, finish_reason: "length" });
    expect((t.metadata.reconstruction_stats as any).missing_prompt_ids).toEqual(["e"]);
    expect((t.metadata.reconstruction_stats as any).empty_responses).toEqual(["e"]);
  });

  it("answers an empty session with an ERROR trajectory", () => {
    const t = perRequest().build(session([], { policy_version: 4 }));
    expect(t).toMatchObject({ status: "ERROR", error: "no completions", traces: [] });
    expect(t.metadata).toMatchObject({ builder: "per_request", record_count: 0, trace_count: 0, policy_version: 4 });
  });

  it("does not share arrays or messages with the session", () => {
    const r = record({ id: "c", seq: 0, prompt: [1, 2], sampled: [3] });
    const s = session([r]);
    const t = perRequest().build(s);
    t.traces[0].prompt_ids.push(99);
    (t.traces[0].prompt_messages[0] as any).content = "changed";
    expect((r.response as any).prompt_token_ids).toEqual([1, 2]);
    expect((r.request as any).messages[0].content).toBe("prompt c");
  });
});
