/** Anthropic → chat on the shapes Claude Code, opencode and pi send (own prose, same structure). */
import { describe, expect, it } from "vitest";
import type { CallContext } from "../src/proxy/dialect.ts";
import { anthropic } from "../src/proxy/dialects/anthropic.ts";
import type { ChatResponse } from "../src/proxy/chat-types.ts";

const ctx: CallContext = { apiType: "anthropic", path: "/v1/messages", query: new URLSearchParams("beta=true"), modelRequested: "claude-x", modelServed: "Qwen/Qwen3-8B" };

const bashSchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: { command: { type: "string", description: "what to run" }, timeout: { type: "number" }, run_in_background: { type: "boolean" } },
  required: ["command"],
  additionalProperties: false,
};

/** Claude Code's shape: billing line first, cached system blocks, a mid-conversation system message, adaptive thinking. */
const claudeCodeTurn2 = {
  model: "claude-x",
  max_tokens: 32000,
  stream: true,
  thinking: { type: "adaptive" },
  output_config: { effort: "high" },
  context_management: { edits: [{ type: "clear_thinking_20251015", keep: "all" }] },
  metadata: { user_id: "{\"device_id\":\"abc\"}" },
  system: [
    { type: "text", text: "x-anthropic-billing-header: cc_version=1.2.3.abc; cc_entrypoint=sdk-cli;" },
    { type: "text", text: "You are an agent.", cache_control: { type: "ephemeral" } },
    { type: "text", text: "\nHelp with software tasks.", cache_control: { type: "ephemeral" } },
  ],
  tools: [
    { name: "Bash", description: "Runs a command.", input_schema: bashSchema },
    { type: "web_search_20250305", name: "web_search", max_uses: 3 },
  ],
  messages: [
    { role: "user", content: [{ type: "text", text: "<reminder>context</reminder>" }, { type: "text", text: "Make a file.", cache_control: { type: "ephemeral" } }] },
    { role: "system", content: "Agent types: general." },
    { role: "assistant", content: [
      { type: "thinking", thinking: "Bash will do.", signature: "sig-opaque" },
      { type: "text", text: "Running." },
      { type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "echo hi > f.txt" } },
    ] },
    { role: "user", content: [
      { tool_use_id: "toolu_1", type: "tool_result", content: "(Bash completed with no output)", is_error: false, cache_control: { type: "ephemeral" } },
    ] },
  ],
};

describe("Anthropic request conversion", () => {
  it("strips the billing line, merges system text and keeps the tool schema as sent", () => {
    const req = anthropic.toChat(claudeCodeTurn2, ctx);
    expect(req.model).toBe("Qwen/Qwen3-8B");
    expect(req.messages[0]).toEqual({ role: "system", content: "You are an agent.\n\nHelp with software tasks.\n\nAgent types: general." });
    expect(JSON.stringify(req)).not.toContain("billing-header");
    expect(req.tools).toEqual([{ type: "function", function: { name: "Bash", description: "Runs a command.", parameters: bashSchema } }]);
    expect(req.tool_choice).toBe("auto");
    expect(req.chat_template_kwargs).toEqual({ enable_thinking: true });
    expect(req.max_tokens).toBe(32000);
    expect(req.stream).toBe(true);
    expect(req.metadata).toBeUndefined();
  });

  it("turns the assistant turn into one message with reasoning and a tool call, and the result into a tool message", () => {
    const req = anthropic.toChat(claudeCodeTurn2, ctx);
    expect(req.messages.slice(1)).toEqual([
      { role: "user", content: "<reminder>context</reminder>\nMake a file." },
      { role: "assistant", content: "Running.", reasoning_content: "Bash will do.", tool_calls: [{ id: "toolu_1", type: "function", function: { name: "Bash", arguments: "{\"command\":\"echo hi > f.txt\"}" } }] },
      { role: "tool", tool_call_id: "toolu_1", content: "(Bash completed with no output)" },
    ]);
  });

  it("gives the same system prompt whatever the billing line says (prefix stays stable)", () => {
    const other = structuredClone(claudeCodeTurn2);
    other.system[0].text = "x-anthropic-billing-header: cc_version=9.9.9.zzz; cc_entrypoint=cli;";
    expect(anthropic.toChat(other, ctx).messages[0]).toEqual(anthropic.toChat(claudeCodeTurn2, ctx).messages[0]);
    const asString = { ...claudeCodeTurn2, system: "x-anthropic-billing-header: cc_version=1;\nYou are an agent." };
    expect(anthropic.toChat(asString, ctx).messages[0].content).toMatch(/^You are an agent\.\n\nAgent types/);
  });

  it("maps tool results given as block arrays, errors and images", () => {
    const req = anthropic.toChat({
      model: "m", max_tokens: 100,
      messages: [
        { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "Read", input: { path: "a.png" } }, { type: "tool_use", id: "t2", name: "Bash", input: { command: "false" } }] },
        { role: "user", content: [
          { type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "an image:" }, { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0K" } }] },
          { type: "tool_result", tool_use_id: "t2", is_error: true, content: [{ type: "text", text: "exit 1" }] },
          { type: "text", text: "continue" },
        ] },
      ],
    }, ctx);
    expect(req.messages.slice(1)).toEqual([
      { role: "tool", tool_call_id: "t1", content: "an image:" },
      { role: "tool", tool_call_id: "t2", content: "[Tool Error] exit 1" },
      { role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0K" } }] },
      { role: "user", content: "continue" },
    ]);
  });

  it("maps tool_choice, stop sequences, sampling and disabled thinking", () => {
    const base = { model: "m", max_tokens: 10, messages: [{ role: "user", content: "hi" }], tools: [{ name: "Bash", input_schema: bashSchema }] };
    const t = (tool_choice: unknown) => anthropic.toChat({ ...base, tool_choice }, ctx);
    expect(t({ type: "any" }).tool_choice).toBe("required");
    expect(t({ type: "none" }).tool_choice).toBe("none");
    expect(t({ type: "tool", name: "Bash" }).tool_choice).toEqual({ type: "function", function: { name: "Bash" } });
    expect(t({ type: "auto", disable_parallel_tool_use: true }).parallel_tool_calls).toBe(false);
    const r = anthropic.toChat({ ...base, stop_sequences: ["END"], temperature: 0.2, top_p: 0.9, top_k: 20, thinking: { type: "disabled" } }, ctx);
    expect(r).toMatchObject({ stop: ["END"], temperature: 0.2, top_p: 0.9, top_k: 20, chat_template_kwargs: { enable_thinking: false } });
  });

  it("refuses a wrong shape naming the field", () => {
    expect(() => anthropic.toChat({ model: "m", max_tokens: 1, messages: [{ role: "bot", content: "x" }] }, ctx)).toThrow(/messages\.0\.role/);
    expect(() => anthropic.toChat({ model: "m", max_tokens: 1 }, ctx)).toThrow(/messages/);
  });
});

function answer(message: Record<string, unknown>, finish: string, extra: Record<string, unknown> = {}): ChatResponse {
  return {
    id: "chatcmpl-abc", object: "chat.completion", created: 1, model: "Qwen/Qwen3-8B",
    choices: [{ index: 0, message: { role: "assistant", content: null, ...message }, finish_reason: finish, ...extra }],
    usage: { prompt_tokens: 100, completion_tokens: 7, total_tokens: 107, prompt_tokens_details: { cached_tokens: 40 } },
  } as ChatResponse;
}

describe("Anthropic answer conversion", () => {
  it("builds thinking, text and tool_use blocks with usage split by cache", () => {
    const resp = answer({ content: "ok", reasoning_content: "why", tool_calls: [{ id: "chatcmpl-tool-1", type: "function", function: { name: "Bash", arguments: "{\"command\":\"ls\"}" } }] }, "tool_calls");
    const before = structuredClone(resp);
    const msg = anthropic.fromChat(resp, { stop_sequences: [] }, ctx) as any;
    expect(resp).toEqual(before);
    expect(msg.content.map((b: any) => b.type)).toEqual(["thinking", "text", "tool_use"]);
    expect(msg.content[2]).toMatchObject({ name: "Bash", input: { command: "ls" } });
    expect(msg.content[2].id).toMatch(/^toolu_[0-9a-f]{24}$/);
    expect(msg).toMatchObject({ type: "message", role: "assistant", model: "claude-x", stop_reason: "tool_use", stop_sequence: null });
    expect(msg.usage).toEqual({ input_tokens: 60, output_tokens: 7, cache_creation_input_tokens: 0, cache_read_input_tokens: 40 });
  });

  it("reports a matched custom stop sequence and an empty answer as one empty text block", () => {
    const msg = anthropic.fromChat(answer({ content: "" }, "stop", { stop_reason: "END" }), { stop_sequences: ["END"] }, ctx) as any;
    expect(msg.stop_reason).toBe("stop_sequence");
    expect(msg.stop_sequence).toBe("END");
    expect(msg.content).toEqual([{ type: "text", text: "" }]);
    expect((anthropic.fromChat(answer({ content: "x" }, "length"), {}, ctx) as any).stop_reason).toBe("max_tokens");
  });
});
