/**
 * The vLLM chat surface of the sim: token fields, logprobs alignment,
 * reasoning and hermes tool calls, streaming that reassembles to the
 * non-streaming answer, determinism, and vLLM-style 400s.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSim, type SimHandle } from "../src/sim/server.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";

const IM_END = 151645;
const bashTool = {
  type: "function",
  function: { name: "bash", description: "Run a shell command", parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } },
};
const RUN_TASK = [{ role: "user", content: "Run the shell command `echo hello > hello.txt` in the current directory, then reply with done." }];

let sim: SimHandle;
beforeAll(async () => {
  sim = await startSim({});
});
afterAll(() => sim.stop());

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${sim.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
}

async function chat(body: Record<string, unknown>): Promise<Json> {
  const r = await post("/v1/chat/completions", { model: "Qwen/Qwen3-8B", return_token_ids: true, logprobs: true, ...body });
  expect(r.status).toBe(200);
  return r.json();
}

async function streamChunks(body: Record<string, unknown>): Promise<Json[]> {
  const r = await post("/v1/chat/completions", { model: "Qwen/Qwen3-8B", return_token_ids: true, logprobs: true, stream: true, ...body });
  expect(r.status).toBe(200);
  expect(r.headers.get("content-type")).toContain("text/event-stream");
  const text = await r.text();
  const events = text.split("\n\n").filter(Boolean).map((e) => e.replace(/^data: /, ""));
  expect(events.at(-1)).toBe("[DONE]");
  return events.slice(0, -1).map((e) => JSON.parse(e));
}

describe("sim /v1/chat/completions", () => {
  it("answers plain text with vLLM token fields aligned to logprobs", async () => {
    const tok = qwen3Tokenizer();
    const body = await chat({ messages: [{ role: "user", content: "Tell me something." }], top_logprobs: 3 });
    const choice = body.choices[0];
    expect(body.prompt_token_ids).toEqual(tok.tokenizeChat([{ role: "user", content: "Tell me something." }]));
    expect(choice.token_ids.at(-1)).toBe(IM_END);
    expect(choice.finish_reason).toBe("stop");
    expect(choice.logprobs.content.map((e: Json) => e.token)).toEqual(choice.token_ids.map((id: number) => tok.tokenText(id)));
    for (const e of choice.logprobs.content) {
      expect(e.bytes).toEqual([...Buffer.from(e.token, "utf8")]);
      expect(e.top_logprobs).toHaveLength(3);
      expect(e.top_logprobs[0].token).toBe(e.token);
    }
    // Thinking is on by default: an empty think block, then the content (vLLM keeps the newlines).
    expect(tok.decode(choice.token_ids)).toBe(`<think>\n\n</think>\n\n${choice.message.content.slice(2)}<|im_end|>`);
    expect(choice.message.reasoning_content).toBe("\n\n");
    expect(body.usage).toEqual({ prompt_tokens: body.prompt_token_ids.length, completion_tokens: choice.token_ids.length, total_tokens: body.prompt_token_ids.length + choice.token_ids.length, prompt_tokens_details: null });
    expect(body.policy_version).toBe("0");
  });

  it("is deterministic per request and varies with the seed", async () => {
    const messages = [{ role: "user", content: "Tell me something." }];
    const a = await chat({ messages, seed: 1 });
    const b = await chat({ messages, seed: 1 });
    expect(b.choices[0].token_ids).toEqual(a.choices[0].token_ids);
    const texts = new Set<string>();
    for (let seed = 0; seed < 6; seed++) texts.add((await chat({ messages, seed })).choices[0].message.content);
    expect(texts.size).toBeGreaterThan(3);
  });

  it("emits a Qwen tool call and parses it back like the hermes parser", async () => {
    const tok = qwen3Tokenizer();
    const body = await chat({ messages: RUN_TASK, tools: [bashTool] });
    const choice = body.choices[0];
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.tool_calls).toHaveLength(1);
    expect(choice.message.tool_calls[0].function).toEqual({ name: "bash", arguments: '{"command": "echo hello > hello.txt"}' });
    expect(choice.message.tool_calls[0].id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
    expect(choice.message.reasoning_content).toBe("\nI will run the command as asked.\n");
    expect(tok.decode(choice.token_ids)).toBe(
      '<think>\nI will run the command as asked.\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"command": "echo hello > hello.txt"}}\n</tool_call><|im_end|>',
    );
    // Next turn: the tool result is in, the playbook's rule is done and the model answers.
    const next = await chat({
      tools: [bashTool],
      messages: [...RUN_TASK, { ...choice.message, tool_calls: choice.message.tool_calls }, { role: "tool", tool_call_id: choice.message.tool_calls[0].id, content: "" }],
    });
    expect(next.choices[0].finish_reason).toBe("stop");
    expect(next.choices[0].message.content).toBe("\n\ndone");
  });

  it("streams chunks whose token_ids, logprobs and deltas reassemble the non-streaming answer", async () => {
    const whole = await chat({ messages: RUN_TASK, tools: [bashTool], seed: 3 });
    const chunks = await streamChunks({ messages: RUN_TASK, tools: [bashTool], seed: 3, stream_options: { include_usage: true } });
    expect(chunks[0].prompt_token_ids).toEqual(whole.prompt_token_ids);
    expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
    const body = chunks.filter((c) => c.choices.length);
    const ids = body.flatMap((c) => c.choices[0].token_ids ?? []);
    const lps = body.flatMap((c) => c.choices[0].logprobs?.content ?? []);
    expect(ids).toEqual(whole.choices[0].token_ids);
    expect(lps).toEqual(whole.choices[0].logprobs.content);
    const reasoning = body.map((c) => c.choices[0].delta.reasoning_content ?? "").join("");
    const content = body.map((c) => c.choices[0].delta.content ?? "").join("");
    expect(reasoning).toBe(whole.choices[0].message.reasoning_content);
    expect(content).toBe(whole.choices[0].message.content);
    const calls = body.flatMap((c) => c.choices[0].delta.tool_calls ?? []);
    expect(calls.map((c: Json) => c.function)).toEqual(whole.choices[0].message.tool_calls.map((c: Json) => c.function));
    expect(body.at(-1).choices[0].finish_reason).toBe("tool_calls");
    expect(chunks.at(-1).choices).toEqual([]);
    expect(chunks.at(-1).usage.completion_tokens).toBe(ids.length);
  });

  it("samples plain JSON under a required or named tool_choice, as vLLM's schema constraint does", async () => {
    const tok = qwen3Tokenizer();
    const named = await chat({ messages: RUN_TASK, tools: [bashTool], tool_choice: { type: "function", function: { name: "bash" } } });
    expect(tok.decode(named.choices[0].token_ids)).toBe('<think>\nI will run the command as asked.\n</think>\n\n{"command": "echo hello > hello.txt"}<|im_end|>');
    // vLLM hands the text after </think> over verbatim as the arguments (leading newlines included).
    expect(named.choices[0].message.tool_calls[0].function).toEqual({ name: "bash", arguments: '\n\n{"command": "echo hello > hello.txt"}' });
    expect(named.choices[0].finish_reason).toBe("stop");
    const required = await chat({ messages: RUN_TASK, tools: [bashTool], tool_choice: "required" });
    expect(tok.decode(required.choices[0].token_ids)).toContain('\n\n[{"name": "bash", "parameters": {"command": "echo hello > hello.txt"}}]<|im_end|>');
    expect(required.choices[0].message.tool_calls[0].function).toEqual({ name: "bash", arguments: '{"command": "echo hello > hello.txt"}' });
    expect(required.choices[0].finish_reason).toBe("tool_calls");
    const chunks = await streamChunks({ messages: RUN_TASK, tools: [bashTool], tool_choice: "required" });
    const calls = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(calls.map((c: Json) => c.function)).toEqual([{ name: "bash", arguments: '{"command": "echo hello > hello.txt"}' }]);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("");
    const unknown = await post("/v1/chat/completions", { model: "m", messages: RUN_TASK, tools: [bashTool], tool_choice: { type: "function", function: { name: "nope" } } });
    expect(unknown.status).toBe(400);
  });

  it("truncates at max_tokens with finish reason length", async () => {
    const body = await chat({ messages: RUN_TASK, tools: [bashTool], max_tokens: 5 });
    const choice = body.choices[0];
    expect(choice.token_ids).toHaveLength(5);
    expect(choice.token_ids).not.toContain(IM_END);
    expect(choice.finish_reason).toBe("length");
    expect(choice.message.tool_calls).toEqual([]);
  });

  it("renders no think block when thinking is disabled", async () => {
    const tok = qwen3Tokenizer();
    const body = await chat({ messages: RUN_TASK, tools: [bashTool], chat_template_kwargs: { enable_thinking: false } });
    expect(tok.decode(body.choices[0].token_ids).startsWith("<tool_call>\n")).toBe(true);
    expect(body.choices[0].message.reasoning_content).toBeNull();
    expect(body.choices[0].message.content).toBeNull();
  });

  it("answers invalid requests with vLLM-style 400s", async () => {
    const bad = await post("/v1/chat/completions", { model: "m", messages: "nope" });
    expect(bad.status).toBe(400);
    const err = (await bad.json()) as Json;
    expect(err.error.type).toBe("BadRequestError");
    expect(err.error.code).toBe(400);
    expect(err.error.message).toContain("messages");
    const notJson = await fetch(`${sim.url}/v1/chat/completions`, { method: "POST", body: "{", headers: { "content-type": "application/json" } });
    expect(notJson.status).toBe(400);
    const long = await post("/v1/chat/completions", { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 40960 });
    expect(long.status).toBe(400);
    expect(((await long.json()) as Json).error.message).toMatch(
      /^This model's maximum context length is 40960 tokens\. However, you requested 40969 tokens \(9 in the messages, 40960 in the completion\)\./,
    );
    const missing = await fetch(`${sim.url}/nope`);
    expect(missing.status).toBe(404);
  });

  it("serves /health and /v1/models", async () => {
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
    const models = (await (await fetch(`${sim.url}/v1/models`)).json()) as Json;
    expect(models.data[0].id).toBe("Qwen/Qwen3-8B");
    expect(models.data[0].max_model_len).toBe(40960);
  });
});
