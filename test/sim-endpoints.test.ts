/**
 * The sim's other surfaces: vLLM /v1/completions, /tokenize, /detokenize;
 * SGLang /generate and chat flags; pause/resume and the policy version.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSim, type SimHandle } from "../src/sim/server.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const bashTool = { type: "function", function: { name: "bash", description: "Run", parameters: { type: "object", properties: { command: { type: "string" } } } } };
const TASK = [{ role: "user", content: "Run `ls -la` now." }];

let sim: SimHandle;
beforeAll(async () => {
  sim = await startSim({});
});
afterAll(() => sim.stop());

async function post(path: string, body: unknown): Promise<{ status: number; json: Json; headers: Headers }> {
  const r = await fetch(`${sim.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, json: text.startsWith("{") ? JSON.parse(text) : text, headers: r.headers };
}

describe("sim vLLM extras", () => {
  it("tokenizes chat messages and text, and detokenizes", async () => {
    const tok = qwen3Tokenizer();
    const t = await post("/tokenize", { model: "m", messages: TASK, tools: [bashTool], return_token_strs: true });
    expect(t.status).toBe(200);
    expect(t.json.tokens).toEqual(tok.tokenizeChat(TASK, { tools: [bashTool] }));
    expect(t.json.count).toBe(t.json.tokens.length);
    expect(t.json.max_model_len).toBe(40960);
    expect(t.json.token_strs[1]).toBe("system");
    const p = await post("/tokenize", { prompt: "hello world" });
    expect(p.json.tokens).toEqual([14990, 1879]);
    const d = await post("/detokenize", { tokens: [151644, 14990, 1879] });
    expect(d.json).toEqual({ prompt: "<|im_start|>hello world" });
    expect((await post("/detokenize", { tokens: [10_000_000] })).status).toBe(400);
  });

  it("completes a token-id prompt with per-choice ids and token_id:N logprobs", async () => {
    const tok = qwen3Tokenizer();
    const prompt = tok.tokenizeChat(TASK, { tools: [bashTool] });
    const r = await post("/v1/completions", { model: "m", prompt, max_tokens: 200, logprobs: 0, return_token_ids: true, return_tokens_as_token_ids: true });
    expect(r.status).toBe(200);
    const c = r.json.choices[0];
    expect(c.prompt_token_ids).toEqual(prompt);
    expect(c.token_ids.at(-1)).toBe(151645);
    expect(c.logprobs.tokens).toEqual(c.token_ids.map((id: number) => `token_id:${id}`));
    expect(c.logprobs.token_logprobs).toHaveLength(c.token_ids.length);
    // The prompt reads as a chat with tools, so the policy answers with the same tool call as the chat endpoint.
    expect(c.text).toContain('<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>');
    const chat = await post("/v1/chat/completions", { model: "m", messages: TASK, tools: [bashTool], return_token_ids: true });
    expect(c.token_ids).toEqual(chat.json.choices[0].token_ids);
    const def = await post("/v1/completions", { model: "m", prompt: "Once upon a time" });
    expect(def.json.usage.completion_tokens).toBeLessThanOrEqual(16);
  });
});

describe("sim SGLang surface", () => {
  it("answers /generate with input_ids and output_token_logprobs triples", async () => {
    const tok = qwen3Tokenizer();
    const input_ids = tok.tokenizeChat(TASK, { tools: [bashTool] });
    const r = await post("/generate", { input_ids, sampling_params: { max_new_tokens: 256, temperature: 1 }, return_logprob: true, return_text_in_logprobs: true, top_logprobs_num: 2 });
    expect(r.status).toBe(200);
    const m = r.json.meta_info;
    expect(m.finish_reason).toEqual({ type: "stop", matched: 151645 });
    expect(m.output_token_logprobs.map((t: Json) => t[1])).toEqual(r.json.output_ids);
    expect(m.output_token_logprobs.map((t: Json) => t[2])).toEqual(r.json.output_ids.map((id: number) => tok.tokenText(id)));
    expect(m.output_top_logprobs[0]).toHaveLength(2);
    expect(m.prompt_tokens).toBe(input_ids.length);
    expect(m.weight_version).toBe("0");
    expect(r.json.text).toBe(tok.decode(r.json.output_ids.slice(0, -1)));
    const cut = await post("/generate", { text: "hello", sampling_params: { max_new_tokens: 3 }, return_logprob: true });
    expect(cut.json.meta_info.finish_reason).toEqual({ type: "length", length: 3 });
    expect(cut.json.meta_info.output_token_logprobs[0][2]).toBeNull();
  });

  it("supports SGLang chat flags and refuses them when streaming", async () => {
    const r = await post("/v1/chat/completions", { model: "m", messages: TASK, return_prompt_token_ids: true, return_meta_info: true, return_token_ids: true });
    const c = r.json.choices[0];
    expect(c.prompt_token_ids).toEqual(qwen3Tokenizer().tokenizeChat(TASK));
    expect(c.meta_info.finish_reason).toEqual({ type: "stop", matched: 151645 });
    expect(c.meta_info.completion_tokens).toBe(c.token_ids.length);
    expect(c.matched_stop).toBe(151645);
    const s = await post("/v1/chat/completions", { model: "m", messages: TASK, stream: true, return_meta_info: true });
    expect(s.status).toBe(400);
    expect(s.json.error.message).toContain("stream=false");
  });
});

describe("sim admin", () => {
  it("stamps the policy version and pauses new generations while in-flight ones finish", async () => {
    sim.setPolicyVersion("v7");
    const a = await post("/v1/chat/completions", { model: "m", messages: TASK });
    expect(a.json.policy_version).toBe("v7");
    expect(a.headers.get("x-policy-version")).toBe("v7");
    expect((await post("/update_weight_version", { new_version: "v8" })).json.policy_version).toBe("v8");
    const g = await post("/generate", { text: "hi", sampling_params: { max_new_tokens: 2 } });
    expect(g.json.meta_info.weight_version).toBe("v8");

    const slow = await startSim({ perTokenMs: 20 });
    try {
      const ask = () =>
        fetch(`${slow.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m", messages: TASK, max_tokens: 10 }) }).then(
          async (r) => ({ at: performance.now(), body: (await r.json()) as Json }),
        );
      const inflight = ask();
      await new Promise((r) => setTimeout(r, 30));
      await fetch(`${slow.url}/admin/pause`, { method: "POST" });
      const t0 = performance.now();
      const waiting = ask();
      const first = await inflight;
      expect(first.body.choices[0].token_ids).toBeNull();
      expect(first.body.choices[0].finish_reason).toBe("length");
      await new Promise((r) => setTimeout(r, 300));
      expect(slow.metrics().waiting).toBe(1);
      expect(slow.metrics().paused).toBe(true);
      slow.setPolicyVersion("after");
      slow.resume();
      const second = await waiting;
      expect(second.at - t0).toBeGreaterThan(300);
      // The sim samples an answer when the request arrives and stamps the version of the weights
      // that sampled it (a learnable policy's logprobs must match that version), not the one in
      // force when the paused request was finally streamed out.
      expect(second.body.policy_version).toBe("0");
      const third = await ask();
      expect(third.body.policy_version).toBe("after");
    } finally {
      await slow.stop();
    }
  });
});
