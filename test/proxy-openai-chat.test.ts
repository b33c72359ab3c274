import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CRED, parseSse, startStack, type Stack } from "./proxy-setup.ts";

const tools = [{ type: "function" as const, function: { name: "bash", description: "run", parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } } }];
const ARGS = JSON.stringify({ command: "echo hello > hello.txt && cat hello.txt && ls -la" });

describe("OpenAI Chat Completions through the proxy", () => {
  let stack: Stack;
  let client: OpenAI;
  beforeAll(async () => {
    stack = await startStack({
      reply: (body) => {
        const last = (body.messages as { role: string }[]).at(-1);
        if (last?.role === "tool") return { content: "The file is written and contains hello, as you asked." };
        return { content: "I will run it.", reasoning: "The user wants a file; bash can do it.", toolCalls: [{ name: "bash", arguments: ARGS }] };
      },
    });
    client = new OpenAI({ baseURL: `${stack.proxy.url}/v1`, apiKey: CRED, maxRetries: 0 });
  });
  afterAll(() => stack.stop());

  function lastPair() {
    const rec = stack.records.at(-1)!.record;
    const upstream = stack.engine.answers.at(-1)! as any;
    return { rec, upstream };
  }

  function expectTokensCaptured() {
    const { rec, upstream } = lastPair();
    const resp = rec.response as any;
    expect(resp.prompt_token_ids).toEqual(upstream.prompt_token_ids);
    expect(resp.choices[0].token_ids).toEqual(upstream.choices[0].token_ids);
    expect(resp.choices[0].logprobs.content.map((c: any) => c.logprob)).toEqual(upstream.choices[0].logprobs.content.map((c: any) => c.logprob));
    expect(resp.choices[0].logprobs.content.map((c: any) => c.token_id)).toEqual(upstream.choices[0].token_ids);
    expect(rec.api_type).toBe("openai_chat");
    expect(rec.attempt).toBe(2);
    expect(rec.completion_id).toMatch(/^msg_[0-9a-f]{12}$/);
    expect(rec.metadata).toMatchObject({ session_id: "sess-1", task_id: "task-1", sample_index: 3, completion_role: "policy" });
    return rec;
  }

  it("answers a tool call non-streamed, equal to what the engine produced", async () => {
    const res = await client.chat.completions.create({ model: "my-model", messages: [{ role: "user", content: "make hello.txt" }], tools });
    const { upstream } = lastPair();
    const u = upstream.choices[0];
    expect(res.model).toBe("my-model");
    expect(res.choices[0].finish_reason).toBe("tool_calls");
    expect(res.choices[0].message.content).toBe(u.message.content);
    expect(res.choices[0].message.tool_calls).toEqual(u.message.tool_calls);
    expect((res.choices[0].message as any).reasoning_content).toBe(u.message.reasoning);
    expect(res.usage).toEqual(upstream.usage);
    expect((res as any).prompt_token_ids).toBeUndefined();
    const rec = expectTokensCaptured();
    expect(rec.request.model).toBe("Qwen/Qwen3-8B");
    expect(rec.request.return_token_ids).toBeUndefined();
    expect(rec.original_request.model).toBe("my-model");
    // The engine got the capture flags and a non-streaming call.
    const sent = stack.engine.requests.at(-1)!;
    expect(sent).toMatchObject({ model: "Qwen/Qwen3-8B", stream: false, logprobs: true, return_token_ids: true });
  });

  it("streams a tool call as a well-formed chunk sequence the SDK reassembles", async () => {
    const stream = client.chat.completions.stream({
      model: "my-model", messages: [{ role: "user", content: "make hello.txt" }], tools, stream_options: { include_usage: true },
    });
    const final = await stream.finalChatCompletion();
    const { upstream } = lastPair();
    const u = upstream.choices[0];
    expect(final.choices[0].finish_reason).toBe("tool_calls");
    expect(final.choices[0].message.content).toBe(u.message.content);
    expect(final.choices[0].message.tool_calls?.map((t) => ({ id: t.id, type: t.type, function: t.function }))).toEqual(u.message.tool_calls);
    expect(final.usage).toEqual(upstream.usage);
    expectTokensCaptured();
    expect(stack.engine.requests.at(-1)!.stream).toBe(false);
    expect(stack.engine.requests.at(-1)!.stream_options).toBeUndefined();
  });

  it("splits streamed text over several deltas and ends with finish_reason and [DONE]", async () => {
    const res = await fetch(`${stack.proxy.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${CRED}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "hi" }, { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "bash", arguments: ARGS } }] }, { role: "tool", tool_call_id: "c1", content: "ok" }] }),
    });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const frames = parseSse(await res.text());
    expect(frames.at(-1)!.data).toBe("[DONE]");
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.data));
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    expect(text).toBe("The file is written and contains hello, as you asked.");
    expect(chunks.filter((c) => c.choices[0]?.delta?.content).length).toBeGreaterThan(2);
    expect(chunks[0].choices[0].delta.role).toBe("assistant");
    expect(chunks.at(-1).choices[0].finish_reason).toBe("stop");
    expect(chunks.every((c) => c.object === "chat.completion.chunk" && c.model === "m")).toBe(true);
  });
});
