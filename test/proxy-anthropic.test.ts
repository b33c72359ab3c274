import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CRED, CRED_DONE, parseSse, startStack, type Stack } from "./proxy-setup.ts";

const tools = [{ name: "Bash", description: "Run a command", input_schema: { $schema: "https://json-schema.org/draft/2020-12/schema", type: "object" as const, properties: { command: { type: "string" } }, required: ["command"] } }];
const ARGS = { command: "echo hello > hello.txt", description: "write the file" };

describe("Anthropic Messages through the proxy", () => {
  let stack: Stack;
  let client: Anthropic;
  beforeAll(async () => {
    stack = await startStack({
      reply: (body) => {
        const msgs = body.messages as { role: string }[];
        if (msgs.at(-1)?.role === "tool") return { content: "done" };
        return { content: "Writing the file now.", reasoning: "A single shell command does it; Bash is the tool.", toolCalls: [{ name: "Bash", arguments: JSON.stringify(ARGS) }] };
      },
    });
    client = new Anthropic({ baseURL: stack.proxy.url, apiKey: CRED, maxRetries: 0 });
  });
  afterAll(() => stack.stop());

  const ask = { model: "claude-sonnet-x", max_tokens: 2048, tools, thinking: { type: "enabled" as const, budget_tokens: 1024 }, messages: [{ role: "user" as const, content: "make hello.txt" }] };

  function expectCaptured() {
    const rec = stack.records.at(-1)!.record as any;
    const up = stack.engine.answers.at(-1)! as any;
    expect(rec.api_type).toBe("anthropic");
    expect(rec.response.prompt_token_ids).toEqual(up.prompt_token_ids);
    expect(rec.response.choices[0].token_ids).toEqual(up.choices[0].token_ids);
    expect(rec.response.choices[0].logprobs.content.map((c: any) => [c.token_id, c.logprob])).toEqual(
      up.choices[0].logprobs.content.map((c: any, i: number) => [up.choices[0].token_ids[i], c.logprob]),
    );
    expect(rec.request.chat_template_kwargs).toEqual({ enable_thinking: true });
    expect(rec.request.tools[0].function.parameters).toEqual(tools[0].input_schema);
    return { rec, up };
  }

  it("creates a message with thinking and tool_use equal to the engine's answer", async () => {
    const msg = await client.messages.create(ask);
    const { up } = expectCaptured();
    const u = up.choices[0].message;
    expect(msg.model).toBe("claude-sonnet-x");
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.content.map((b) => b.type)).toEqual(["thinking", "text", "tool_use"]);
    expect((msg.content[0] as any).thinking).toBe(u.reasoning);
    expect((msg.content[1] as any).text).toBe(u.content);
    const tu = msg.content[2] as Anthropic.ToolUseBlock;
    expect(tu.name).toBe("Bash");
    expect(tu.input).toEqual(ARGS);
    expect(tu.id).toMatch(/^toolu_/);
    expect(msg.usage.input_tokens).toBe(up.usage.prompt_tokens);
    expect(msg.usage.output_tokens).toBe(up.usage.completion_tokens);
  });

  it("streams the same message as a complete event sequence", async () => {
    const stream = client.messages.stream(ask);
    const msg = await stream.finalMessage();
    const { up } = expectCaptured();
    const u = up.choices[0].message;
    expect(msg.stop_reason).toBe("tool_use");
    expect((msg.content[0] as any).thinking).toBe(u.reasoning);
    expect((msg.content[0] as any).signature).toMatch(/^sg_polar_/);
    expect((msg.content[1] as any).text).toBe(u.content);
    expect((msg.content[2] as any).input).toEqual(ARGS);
    expect(msg.usage.output_tokens).toBe(up.usage.completion_tokens);
  });

  it("sends event lines, block stops, message_delta and message_stop in order", async () => {
    const res = await fetch(`${stack.proxy.url}/v1/messages?beta=true`, {
      method: "POST",
      headers: { "x-api-key": CRED, "anthropic-version": "2023-06-01", "content-type": "application/json" },
      body: JSON.stringify({ ...ask, stream: true }),
    });
    const frames = parseSse(await res.text());
    for (const f of frames) expect(JSON.parse(f.data).type).toBe(f.event);
    const names = frames.map((f) => f.event);
    expect(names[0]).toBe("message_start");
    expect(names.slice(-2)).toEqual(["message_delta", "message_stop"]);
    expect(names.filter((n) => n === "content_block_start").length).toBe(3);
    expect(names.filter((n) => n === "content_block_stop").length).toBe(3);
    const json = frames.filter((f) => f.event === "content_block_delta").map((f) => JSON.parse(f.data).delta).filter((d) => d.type === "input_json_delta");
    expect(json.length).toBeGreaterThan(1);
    expect(JSON.parse(json.map((d) => d.partial_json).join(""))).toEqual(ARGS);
  });

  it("carries a tool result back as a tool message and strips the billing header", async () => {
    const first = await client.messages.create(ask);
    const tu = first.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
    const msg = await client.messages.create({
      ...ask,
      system: [{ type: "text", text: "x-anthropic-billing-header: cc_version=9.9; cc_entrypoint=sdk-cli;" }, { type: "text", text: "You are a careful agent." }],
      messages: [...ask.messages, { role: "assistant", content: first.content }, { role: "user", content: [{ type: "tool_result", tool_use_id: tu.id, content: [{ type: "text", text: "(no output)" }] }] }],
    });
    expect(msg.stop_reason).toBe("end_turn");
    expect(msg.content).toEqual([{ type: "text", text: "done" }]);
    const req = stack.records.at(-1)!.record.request as any;
    expect(req.messages[0]).toEqual({ role: "system", content: "You are a careful agent." });
    expect(req.messages[2].tool_calls[0].function.arguments).toBe(JSON.stringify(ARGS));
    expect(req.messages[2].reasoning_content).toBe("A single shell command does it; Bash is the tool.");
    expect(req.messages[3]).toEqual({ role: "tool", tool_call_id: tu.id, content: "(no output)" });
  });

  it("counts tokens with count_tokens", async () => {
    const before = stack.records.length;
    const r = await client.messages.countTokens({ model: "claude-sonnet-x", tools, messages: [{ role: "user", content: "make hello.txt" }] });
    expect(r.input_tokens).toBeGreaterThan(0);
    expect(stack.records.length).toBe(before);
  });

  it("refuses in Anthropic's error format", async () => {
    const bad = new Anthropic({ baseURL: stack.proxy.url, apiKey: "unknown", maxRetries: 0 });
    await expect(bad.messages.create(ask)).rejects.toMatchObject({ status: 401, error: { type: "error", error: { type: "authentication_error" } } });
    const done = new Anthropic({ baseURL: stack.proxy.url, apiKey: CRED_DONE, maxRetries: 0 });
    await expect(done.messages.create(ask)).rejects.toMatchObject({ status: 403, error: { error: { type: "permission_error" } } });
    await expect(client.messages.create({ ...ask, messages: "nope" as any })).rejects.toMatchObject({ status: 400, error: { error: { type: "invalid_request_error" } } });
  });
});
