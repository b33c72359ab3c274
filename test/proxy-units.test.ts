/** Routing, credentials, the finish-reason table, engine flags and normalization, stream splitting. */
import { describe, expect, it } from "vitest";
import { detectByBody, detectRoute, headerCredential, splitCredentialPath } from "../src/proxy/detect.ts";
import { normalizeResponse, withEngineFlags } from "../src/proxy/engine.ts";
import { contextNumbers, isContextLengthMessage } from "../src/proxy/errors.ts";
import { anthropicStopReason, FINISH_TABLE, finishMapping } from "../src/proxy/finish-reasons.ts";
import { sideKind } from "../src/proxy/side-calls.ts";
import { splitDeltas } from "../src/proxy/sse.ts";

describe("vendor detection", () => {
  const post = (p: string, h: Record<string, string> = {}) => detectRoute("POST", p, h);
  it("goes by path first", () => {
    expect(post("/v1/messages")).toEqual({ apiType: "anthropic", op: "generate" });
    expect(post("/v1/messages/count_tokens")).toEqual({ apiType: "anthropic", op: "count_tokens" });
    expect(post("/v1/chat/completions", { "anthropic-version": "2023-06-01" })).toEqual({ apiType: "openai_chat", op: "generate" });
    expect(post("/v1/responses")).toEqual({ apiType: "openai_responses", op: "generate" });
    expect(post("/v1beta/models/gemini-2.5-pro:generateContent")).toEqual({ apiType: "google", op: "generate", pathModel: "gemini-2.5-pro", googleStream: false });
    expect(post("/v1beta/models/m:streamGenerateContent")).toMatchObject({ apiType: "google", googleStream: true });
    expect(post("/v1beta/models/m:countTokens")).toMatchObject({ apiType: "google", op: "count_tokens" });
  });
  it("then headers, then the body", () => {
    expect(post("/anything", { "anthropic-version": "2023-06-01" })).toEqual({ apiType: "anthropic", op: "generate" });
    expect(post("/anything")).toEqual({ op: "generate" });
    expect(detectByBody({ contents: [] })).toBe("google");
    expect(detectByBody({ input: "x", instructions: "y" })).toBe("openai_responses");
    expect(detectByBody({ max_tokens: 5, system: "s", messages: [] })).toBe("anthropic");
    expect(detectByBody({ messages: [] })).toBe("openai_chat");
  });
  it("routes model listings by API", () => {
    expect(detectRoute("GET", "/v1/models", {})).toEqual({ apiType: "openai_chat", op: "list_models" });
    expect(detectRoute("GET", "/v1/models", { "anthropic-version": "x" })).toEqual({ apiType: "anthropic", op: "list_models" });
    expect(detectRoute("GET", "/v1beta/models/gemini-x", {})).toEqual({ apiType: "google", op: "get_model", pathModel: "gemini-x" });
    expect(detectRoute("GET", "/nope", {})).toBeUndefined();
    expect(detectRoute("DELETE", "/v1/messages", {})).toBeUndefined();
  });
});

describe("credentials", () => {
  it("reads Bearer, then x-api-key, then x-goog-api-key, then ?key=", () => {
    expect(headerCredential({ authorization: "Bearer abc", "x-api-key": "zzz" }, undefined)).toBe("abc");
    expect(headerCredential({ "x-api-key": "k1" }, undefined)).toBe("k1");
    expect(headerCredential({ "x-goog-api-key": "g1" }, undefined)).toBe("g1");
    expect(headerCredential({}, new URLSearchParams("key=q1&alt=sse"))).toBe("q1");
    expect(headerCredential({ authorization: "Basic xyz" }, undefined)).toBeUndefined();
  });
  it("splits the /s/<credential>/ path form", () => {
    expect(splitCredentialPath("/s/cred%2Fx/v1/chat/completions")).toEqual({ credential: "cred/x", path: "/v1/chat/completions" });
    expect(splitCredentialPath("/v1/messages")).toEqual({ path: "/v1/messages" });
  });
});

describe("finish reasons", () => {
  it("maps every upstream reason for every vendor", () => {
    expect(finishMapping("stop")).toEqual({ anthropic: "end_turn", responses: { status: "completed" }, google: "STOP" });
    expect(finishMapping("length")).toEqual({ anthropic: "max_tokens", responses: { status: "incomplete", reason: "max_output_tokens" }, google: "MAX_TOKENS" });
    expect(finishMapping("tool_calls")).toEqual({ anthropic: "tool_use", responses: { status: "completed" }, google: "STOP" });
    expect(finishMapping("content_filter")).toEqual({ anthropic: "refusal", responses: { status: "incomplete", reason: "content_filter" }, google: "SAFETY" });
    expect(finishMapping("abort").responses.status).toBe("failed");
    expect(finishMapping(null)).toBe(FINISH_TABLE.stop);
    expect(finishMapping("weird")).toBe(FINISH_TABLE.stop);
  });
  it("reports Anthropic's stop_sequence only for a client stop string", () => {
    expect(anthropicStopReason("stop", "END", ["END"])).toEqual({ stop_reason: "stop_sequence", stop_sequence: "END" });
    expect(anthropicStopReason("stop", 151645, ["END"])).toEqual({ stop_reason: "end_turn", stop_sequence: null });
  });
});

describe("engine flavors", () => {
  const req = { model: "Q", stream: true, stream_options: { include_usage: true }, messages: [{ role: "assistant" as const, content: "x", reasoning_content: "r" }] };
  it("adds vLLM capture flags without touching the pivot request", () => {
    const out = withEngineFlags(req, "vllm") as any;
    expect(out).toMatchObject({ stream: false, logprobs: true, return_token_ids: true, top_logprobs: 0 });
    expect(out.stream_options).toBeUndefined();
    expect(out.messages[0]).toEqual({ role: "assistant", content: "x", reasoning: "r" });
    expect(req.messages[0].reasoning_content).toBe("r");
    expect(req.stream).toBe(true);
  });
  it("adds SGLang capture flags", () => {
    expect(withEngineFlags(req, "sglang")).toMatchObject({ stream: false, logprobs: true, return_prompt_token_ids: true, return_meta_info: true });
  });
  it("normalizes SGLang meta_info triples into token ids and logprobs, and timings", () => {
    const raw = {
      id: "x", object: "chat.completion", created: 0, model: "Q",
      choices: [{ index: 0, message: { role: "assistant", content: "hi", reasoning_content: null }, finish_reason: "stop", prompt_token_ids: [1, 2, 3], meta_info: { e2e_latency: 0.5, queue_time: 0.01, output_token_logprobs: [[-0.1, 10, null], [-0.2, 11, "x"]] } }],
    };
    const { response, timings } = normalizeResponse(raw, "sglang");
    expect(response.prompt_token_ids).toEqual([1, 2, 3]);
    expect(response.choices[0].token_ids).toEqual([10, 11]);
    expect(response.choices[0].logprobs!.content).toEqual([{ token_id: 10, logprob: -0.1 }, { token_id: 11, logprob: -0.2, token: "x" }]);
    expect(response.choices[0].meta_info).toBeUndefined();
    expect(timings).toEqual({ e2e_ms: 500, queue_ms: 10 });
  });
  it("normalizes vLLM reasoning and stamps token ids onto aligned logprobs", () => {
    const raw = { id: "x", choices: [{ index: 0, message: { role: "assistant", content: "a", reasoning: "r" }, finish_reason: "stop", token_ids: [5, 6], logprobs: { content: [{ token: "a", logprob: -1 }, { token: "b", logprob: -2 }] } }], prompt_token_ids: [1] };
    const { response } = normalizeResponse(raw, "vllm");
    expect(response.choices[0].message.reasoning_content).toBe("r");
    expect(response.choices[0].message.reasoning).toBeUndefined();
    expect(response.choices[0].logprobs!.content!.map((c) => c.token_id)).toEqual([5, 6]);
  });
});

describe("side calls", () => {
  const req = (system: string, tools?: unknown[]) => ({ model: "Q", messages: [{ role: "system" as const, content: system }, { role: "user" as const, content: "hi" }], tools: tools as any });
  it("knows title generators and routers, never a call with tools", () => {
    expect(sideKind(req("Generate a concise, sentence-case title for this session."), "m")).toBe("title");
    expect(sideKind(req("You are a title generator. Output only the title."), "m")).toBe("title");
    expect(sideKind(req("You are a specialized Task Routing AI."), "m")).toBe("router");
    expect(sideKind(req("You are a title generator.", [{ type: "function", function: { name: "x" } }]), "m")).toBeUndefined();
    expect(sideKind(req("You are a coding agent."), "m")).toBeUndefined();
  });
});

describe("context-length messages", () => {
  it("recognises vLLM and SGLang wording and reads the numbers", () => {
    const v = "This model's maximum context length is 40960 tokens. However, you requested 50000 tokens (49000 in the messages, 1000 in the completion).";
    expect(isContextLengthMessage(v)).toBe(true);
    expect(contextNumbers(v)).toEqual({ requested: 50000, limit: 40960 });
    const s = "The input (50123 tokens) is longer than the model's context length (40960 tokens).";
    expect(isContextLengthMessage(s)).toBe(true);
    expect(contextNumbers(s)).toEqual({ requested: 50123, limit: 40960 });
    expect(isContextLengthMessage("temperature must be positive")).toBe(false);
  });
});

describe("delta splitting", () => {
  it("splits into several pieces that join back, never inside a surrogate pair", () => {
    const text = "héllo 👋 ".repeat(20);
    const pieces = splitDeltas(text);
    expect(pieces.length).toBeGreaterThan(2);
    expect(pieces.join("")).toBe(text);
    for (const p of pieces) expect(Buffer.from(p, "utf8").toString("utf8")).toBe(p);
    expect(splitDeltas("")).toEqual([]);
    expect(splitDeltas("ok")).toEqual(["ok"]);
  });
});
