/** Google → chat on the shapes Gemini CLI and pi send (own prose, same structure), and back. */
import { describe, expect, it } from "vitest";
import type { ChatResponse } from "../src/proxy/chat-types.ts";
import type { CallContext } from "../src/proxy/dialect.ts";
import { google } from "../src/proxy/dialects/google.ts";

const ctx: CallContext = { apiType: "google", path: "/v1beta/models/gemini-x:streamGenerateContent", query: new URLSearchParams("alt=sse"), modelRequested: "gemini-x", modelServed: "Qwen/Qwen3-8B" };

const shellSchema = { type: "object", properties: { command: { type: "string" }, dir_path: { type: "string" } }, required: ["command"] };

/** Gemini CLI's shape: systemInstruction with role user, parametersJsonSchema, echoed call with id and thought signature. */
const geminiTurn2 = {
  contents: [
    { role: "user", parts: [{ text: "<session_context>cwd /w</session_context>" }, { text: "Make a file." }] },
    { role: "model", parts: [{ functionCall: { id: "run_1", name: "run_shell_command", args: { command: "echo hi > f.txt" } }, thoughtSignature: "skip_thought_signature_validator" }] },
    { role: "user", parts: [{ functionResponse: { id: "run_1", name: "run_shell_command", response: { output: "Output: (empty)" } } }] },
  ],
  systemInstruction: { role: "user", parts: [{ text: "You are a CLI agent." }] },
  tools: [{ functionDeclarations: [{ name: "run_shell_command", description: "Runs a command.", parametersJsonSchema: shellSchema }] }],
  generationConfig: { temperature: 1, topP: 0.95, topK: 64, thinkingConfig: { includeThoughts: true } },
};

describe("Google request conversion", () => {
  it("maps system, turns, calls with ids and function responses", () => {
    const req = google.toChat(geminiTurn2, ctx);
    expect(req.messages).toEqual([
      { role: "system", content: "You are a CLI agent." },
      { role: "user", content: "<session_context>cwd /w</session_context>\nMake a file." },
      { role: "assistant", content: null, tool_calls: [{ id: "run_1", type: "function", function: { name: "run_shell_command", arguments: "{\"command\":\"echo hi > f.txt\"}" } }] },
      { role: "tool", tool_call_id: "run_1", content: "{\"output\":\"Output: (empty)\"}" },
    ]);
    expect(req.tools).toEqual([{ type: "function", function: { name: "run_shell_command", description: "Runs a command.", parameters: shellSchema } }]);
    expect(req).toMatchObject({ temperature: 1, top_p: 0.95, top_k: 64, chat_template_kwargs: { enable_thinking: true } });
  });

  it("pairs calls without ids (pi) with their responses by name and order", () => {
    const req = google.toChat({
      contents: [
        { role: "user", parts: [{ text: "go" }] },
        { role: "model", parts: [{ functionCall: { name: "bash", args: { command: "a" } } }, { functionCall: { name: "bash", args: { command: "b" } } }] },
        { role: "user", parts: [{ functionResponse: { name: "bash", response: { output: "A" } } }, { functionResponse: { name: "bash", response: { output: "B" } } }] },
      ],
      generationConfig: { maxOutputTokens: 8192 },
    }, ctx);
    const ids = req.messages[1].tool_calls!.map((t) => t.id);
    expect(new Set(ids).size).toBe(2);
    expect(req.messages.slice(2).map((m) => m.tool_call_id)).toEqual(ids);
    expect(req.max_tokens).toBe(8192);
  });

  it("keeps thought parts as reasoning, lower-cases OpenAPI types and maps the router's JSON schema", () => {
    const req = google.toChat({
      contents: [
        { role: "user", parts: [{ text: "q" }] },
        { role: "model", parts: [{ text: "pondering", thought: true }, { text: "ans" }, { text: "wer" }] },
        { role: "user", parts: [{ text: "next" }] },
      ],
      tools: [{ functionDeclarations: [{ name: "f", parameters: { type: "OBJECT", properties: { n: { type: "INTEGER" } } } }] }],
      toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["f"] } },
      generationConfig: { responseMimeType: "application/json", responseJsonSchema: { type: "OBJECT", properties: { score: { type: "INTEGER" } } }, stopSequences: ["X"] },
    }, ctx);
    expect(req.messages[1]).toEqual({ role: "assistant", content: "answer", reasoning_content: "pondering" });
    expect((req.tools![0] as any).function.parameters).toEqual({ type: "object", properties: { n: { type: "integer" } } });
    expect(req.tool_choice).toEqual({ type: "function", function: { name: "f" } });
    expect(req.response_format).toEqual({ type: "json_schema", json_schema: { name: "google_response", schema: { type: "object", properties: { score: { type: "integer" } } } } });
    expect(req.stop).toEqual(["X"]);
  });

  it("refuses a body without contents", () => {
    expect(() => google.toChat({ systemInstruction: { parts: [] } }, ctx)).toThrow(/contents/);
  });
});

describe("Google answer conversion", () => {
  const resp: ChatResponse = {
    id: "chatcmpl-9", object: "chat.completion", created: 1, model: "Qwen/Qwen3-8B",
    choices: [{ index: 0, message: { role: "assistant", content: "ok", reasoning_content: "r", tool_calls: [{ id: "c9", type: "function", function: { name: "run_shell_command", arguments: "{\"command\":\"ls\"}" } }] }, finish_reason: "tool_calls" }],
    usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 },
  };

  it("puts thought, text and a signed functionCall in one candidate ending in STOP", () => {
    const r = google.fromChat(resp, {}, ctx) as any;
    const parts = r.candidates[0].content.parts;
    expect(parts[0]).toEqual({ text: "r", thought: true });
    expect(parts[1]).toEqual({ text: "ok" });
    expect(parts[2].functionCall).toEqual({ id: "c9", name: "run_shell_command", args: { command: "ls" } });
    expect(typeof parts[2].thoughtSignature).toBe("string");
    expect(r.candidates[0].finishReason).toBe("STOP");
    expect(r.usageMetadata).toEqual({ promptTokenCount: 12, candidatesTokenCount: 3, totalTokenCount: 15 });
  });

  it("streams JSON-array chunks without alt=sse", () => {
    const text = google.toStream(resp, {}, { ...ctx, query: new URLSearchParams() });
    const chunks = JSON.parse(text);
    expect(Array.isArray(chunks)).toBe(true);
    expect(chunks.at(-1).candidates[0].finishReason).toBe("STOP");
  });
});
