/**
 * The proxy fits the output-token request to the engine's context: it learns
 * `max_model_len` from the upstreams' `GET /v1/models` and lowers max_tokens
 * (and max_completion_tokens) so prompt + output fits, recording both values.
 * Against the real sim (40,960-token context, the real Qwen3 template), an
 * Anthropic call asking 32,000 output tokens on a ~19,000-token prompt — what
 * Claude Code sends on its first call — succeeds instead of failing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CompletionRecord } from "../src/protocol/schemas.ts";
import type { ChatRequest } from "../src/proxy/chat-types.ts";
import { ContextLimit, fitOutputTokens, TEMPLATE_MARGIN_TOKENS } from "../src/proxy/context-fit.ts";
import { startProxy, type ProxyHandle } from "../src/proxy/index.ts";
import { startSim, type SimHandle } from "../src/sim/server.ts";
import { silentLogger } from "../src/util/log.ts";

const req = (o: Partial<ChatRequest>): ChatRequest => ({ model: "m", messages: [{ role: "user", content: "hi" }], ...o }) as ChatRequest;

describe("fitOutputTokens (logic)", () => {
  it("leaves a request that surely fits alone, without counting its prompt", async () => {
    let counted = 0;
    const r = req({ max_tokens: 1000 });
    expect(await fitOutputTokens(r, 500, 40_960, async () => ++counted)).toBeUndefined();
    expect(counted).toBe(0);
    expect(r.max_tokens).toBe(1000);
  });

  it("lowers every output field above the room left by the counted prompt", async () => {
    const r = req({ max_tokens: 32_000, max_completion_tokens: 30_000 });
    const clamp = await fitOutputTokens(r, 60_000, 40_960, async () => 19_000);
    expect(clamp).toEqual({ fields: ["max_tokens", "max_completion_tokens"], original: 32_000, clamped: 21_960, prompt_tokens: 19_000, max_model_len: 40_960 });
    expect([r.max_tokens, r.max_completion_tokens]).toEqual([21_960, 21_960]);
  });

  it("only the field that overflows is lowered; a request that fits after counting is untouched", async () => {
    const r = req({ max_tokens: 100, max_completion_tokens: 30_000 });
    const clamp = await fitOutputTokens(r, 60_000, 40_960, async () => 19_000);
    expect(clamp?.fields).toEqual(["max_completion_tokens"]);
    expect([r.max_tokens, r.max_completion_tokens]).toEqual([100, 21_960]);
    const fits = req({ max_tokens: 20_000 });
    expect(await fitOutputTokens(fits, 40_000, 40_960, async () => 19_000)).toBeUndefined();
    expect(fits.max_tokens).toBe(20_000);
  });

  it("changes nothing without a known limit, without an output request, or when the prompt alone fills the context", async () => {
    const never = async () => {
      throw new Error("must not count");
    };
    expect(await fitOutputTokens(req({ max_tokens: 99_999 }), 10, undefined, never)).toBeUndefined();
    expect(await fitOutputTokens(req({}), 99_999, 40_960, never)).toBeUndefined();
    const full = req({ max_tokens: 10 });
    expect(await fitOutputTokens(full, 99_999, 40_960, async () => 41_000)).toBeUndefined();
    expect(full.max_tokens).toBe(10); // the engine refuses it with its own context-length error
  });

  it("the cheap bound covers the template margin", async () => {
    let counted = 0;
    await fitOutputTokens(req({ max_tokens: 40_960 - TEMPLATE_MARGIN_TOKENS - 100 }), 101, 40_960, async () => ++counted);
    expect(counted).toBe(1);
  });
});

describe("ContextLimit", () => {
  it("takes the smallest max_model_len of the upstreams, asks once, and retries a failed lookup later", async () => {
    let calls = 0;
    let now = 0;
    let answers: Array<{ url: string; body?: Record<string, unknown> }> = [{ url: "a" }];
    const limit = new ContextLimit({ getAll: async () => (calls++, answers) as never }, () => now);
    expect(await limit.get()).toBeUndefined();
    answers = [{ url: "a", body: { data: [{ id: "x", max_model_len: 40_960 }] } }, { url: "b", body: { data: [{ id: "y", max_model_len: 32_768 }] } }];
    expect(await limit.get()).toBeUndefined(); // the failure is remembered for a while
    now += 31_000;
    expect(await limit.get()).toBe(32_768);
    expect(await limit.get()).toBe(32_768);
    expect(calls).toBe(2);
  });
});

describe("proxy + sim: Claude Code's first call on a 40,960-token engine", () => {
  let sim: SimHandle;
  let proxy: ProxyHandle;
  const records: CompletionRecord[] = [];
  beforeAll(async () => {
    sim = await startSim({ log: silentLogger() });
    const session = { sessionId: "s1", taskId: "t1", attempt: 1, metadata: {}, active: true };
    proxy = await startProxy(
      { sessions: { lookup: (c) => (c === "key" ? session : undefined) }, sink: { record: async (_s, r) => void records.push(r) }, log: silentLogger() },
      { host: "127.0.0.1", port: 0, upstreams: [sim.url], flavor: "vllm", modelServed: "Qwen/Qwen3-8B", maxBodyBytes: 8 << 20, upstreamTimeoutMs: 60_000 },
    );
  });
  afterAll(async () => {
    await proxy?.stop();
    await sim?.stop();
  });

  it("the sim reports max_model_len in /v1/models", async () => {
    const models = (await (await fetch(`${sim.url}/v1/models`)).json()) as { data: Array<{ max_model_len: number }> };
    expect(models.data[0].max_model_len).toBe(40_960);
  });

  it("32,000 output tokens on a ~19,000-token prompt: clamped to the room left, answered, both values recorded", async () => {
    // ~19k tokens: common short words are one Qwen3 token each.
    const words = Array.from({ length: 19_000 }, (_, i) => ["alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "tree"][i % 8]).join(" ");
    const body = { model: "claude-sonnet-4-5", max_tokens: 32_000, system: "You are a coding agent.", messages: [{ role: "user", content: words }] };
    const direct = await fetch(`${sim.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", max_tokens: 32_000, messages: [{ role: "system", content: body.system }, { role: "user", content: words }] }),
    });
    expect(direct.status).toBe(400); // what the engine says without the clamp
    const r = await fetch(`${proxy.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "key", "anthropic-version": "2023-06-01" },
      body: JSON.stringify(body),
    });
    expect(r.status).toBe(200);
    const answer = (await r.json()) as { content: unknown[]; usage: { input_tokens: number } };
    const rec = records.at(-1)! as CompletionRecord & { response: { prompt_token_ids: number[] }; request: { max_tokens: number } };
    const promptTokens = rec.response.prompt_token_ids.length;
    expect(promptTokens).toBeGreaterThan(19_000);
    expect(answer.usage.input_tokens).toBe(promptTokens);
    expect(rec.metadata.output_tokens_clamp).toEqual({ fields: ["max_tokens"], original: 32_000, clamped: 40_960 - promptTokens, prompt_tokens: promptTokens, max_model_len: 40_960 });
    expect(rec.request.max_tokens).toBe(40_960 - promptTokens);
    expect((rec.original_request as { max_tokens: number }).max_tokens).toBe(32_000);
  }, 60_000);

  it("a call that fits is sent unchanged and carries no clamp", async () => {
    const r = await fetch(`${proxy.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "key", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "claude", max_tokens: 64, messages: [{ role: "user", content: "hello" }] }),
    });
    expect(r.status).toBe(200);
    const rec = records.at(-1)! as CompletionRecord & { request: { max_tokens: number } };
    expect(rec.metadata.output_tokens_clamp).toBeUndefined();
    expect(rec.request.max_tokens).toBe(64);
  });
});
