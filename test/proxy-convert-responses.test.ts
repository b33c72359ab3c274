/** Responses → chat on the shapes Codex, opencode and pi send (own prose, same structure), and back. */
import { describe, expect, it } from "vitest";
import type { ChatResponse } from "../src/proxy/chat-types.ts";
import type { CallContext } from "../src/proxy/dialect.ts";
import { responses } from "../src/proxy/dialects/responses.ts";
import { encodeReasoning } from "../src/proxy/ids.ts";

const ctx: CallContext = { apiType: "openai_responses", path: "/v1/responses", query: new URLSearchParams(), modelRequested: "gpt-x", modelServed: "Qwen/Qwen3-8B" };

const execParams = { type: "object", properties: { cmd: { type: "string" }, workdir: { type: "string" } }, required: ["cmd"], additionalProperties: false };

/** Codex's shape: developer items, function_call with status and id, namespace and built-in tools, reasoning summary auto. */
const codexTurn2 = {
  model: "gpt-x", stream: true, store: false, tool_choice: "auto", parallel_tool_calls: true,
  reasoning: { summary: "auto" }, include: ["reasoning.encrypted_content"], prompt_cache_key: "k",
  client_metadata: { thread_id: "t" },
  input: [
    { type: "message", id: "msg_a", role: "developer", content: [{ type: "input_text", text: "You are a coding agent." }] },
    { type: "message", id: "msg_b", role: "developer", content: [{ type: "input_text", text: "<skills>none</skills>" }, { type: "input_text", text: "<sandbox>off</sandbox>" }] },
    { type: "message", id: "msg_c", role: "user", content: [{ type: "input_text", text: "<env><cwd>/w</cwd></env>" }] },
    { type: "message", id: "msg_d", role: "user", content: [{ type: "input_text", text: "Make a file." }] },
    { type: "reasoning", id: "rs_1", summary: [], encrypted_content: encodeReasoning("exec_command can write it.") },
    { type: "function_call", status: "completed", id: "fc_1", name: "exec_command", arguments: "{\"cmd\":\"echo hi > f.txt\"}", call_id: "call_1" },
    { type: "function_call_output", id: "fco_1", call_id: "call_1", output: "Process exited with code 0" },
  ],
  tools: [
    { type: "function", name: "exec_command", description: "Runs a command.", strict: false, parameters: execParams },
    { type: "namespace", name: "agents", description: "Sub-agents.", tools: [{ type: "function", name: "spawn", description: "Start one.", strict: false, parameters: { type: "object", properties: { task: { type: "string" } }, required: ["task"] } }] },
    { type: "custom", name: "apply_patch", description: "Applies a patch.", format: { type: "grammar", syntax: "lark", definition: "start: /.+/" } },
    { type: "web_search", external_web_access: true },
  ],
};

describe("Responses request conversion", () => {
  it("merges developer items into the system message and rebuilds the assistant turn", () => {
    const req = responses.toChat(codexTurn2, ctx);
    expect(req.messages).toEqual([
      { role: "system", content: "You are a coding agent.\n\n<skills>none</skills>\n<sandbox>off</sandbox>" },
      { role: "user", content: "<env><cwd>/w</cwd></env>" },
      { role: "user", content: "Make a file." },
      { role: "assistant", content: null, reasoning_content: "exec_command can write it.", tool_calls: [{ id: "call_1", type: "function", function: { name: "exec_command", arguments: "{\"cmd\":\"echo hi > f.txt\"}" } }] },
      { role: "tool", tool_call_id: "call_1", content: "Process exited with code 0" },
    ]);
    expect(req.chat_template_kwargs).toEqual({ enable_thinking: true });
    expect(req.parallel_tool_calls).toBe(true);
    expect(req.stream).toBe(true);
  });

  it("flattens function, namespace and custom tools and leaves built-in tools out", () => {
    const req = responses.toChat(codexTurn2, ctx);
    expect(req.tools!.map((t: any) => t.function.name)).toEqual(["exec_command", "agents__spawn", "apply_patch"]);
    expect((req.tools![0] as any).function.parameters).toEqual(execParams);
    expect((req.tools![2] as any).function.parameters.properties.input.type).toBe("string");
    expect(req.tool_choice).toBe("auto");
  });

  it("reads opencode/pi shapes: system role items, string and part contents, calls without item ids", () => {
    const req = responses.toChat({
      model: "m", max_output_tokens: 32000, store: false, stream: true,
      input: [
        { role: "system", content: "You are a helper." },
        { role: "user", content: [{ type: "input_text", text: "Do it." }] },
        { type: "function_call", call_id: "call_3", name: "bash", arguments: "{\"command\":\"ls\"}" },
        { type: "function_call_output", call_id: "call_3", output: "(no output)" },
        { role: "assistant", content: [{ type: "output_text", text: "Done." }] },
        { role: "user", content: [{ type: "input_text", text: "Thanks" }, { type: "input_image", image_url: "data:image/png;base64,AAA", detail: "auto" }] },
      ],
      tools: [{ type: "function", name: "bash", parameters: { type: "object", properties: { command: { type: "string" } } }, strict: false }],
    }, ctx);
    expect(req.max_tokens).toBe(32000);
    expect(req.messages).toEqual([
      { role: "system", content: "You are a helper." },
      { role: "user", content: "Do it." },
      { role: "assistant", content: null, tool_calls: [{ id: "call_3", type: "function", function: { name: "bash", arguments: "{\"command\":\"ls\"}" } }] },
      { role: "tool", tool_call_id: "call_3", content: "(no output)" },
      { role: "assistant", content: "Done." },
      { role: "user", content: [{ type: "text", text: "Thanks" }, { type: "image_url", image_url: { url: "data:image/png;base64,AAA", detail: "auto" } }] },
    ]);
  });

  it("takes instructions and string input, json_schema text format and effort none", () => {
    const req = responses.toChat({ model: "m", instructions: "Be brief.", input: "hi", reasoning: { effort: "none" }, text: { format: { type: "json_schema", name: "out", schema: { type: "object" } } } }, ctx);
    expect(req.messages).toEqual([{ role: "system", content: "Be brief." }, { role: "user", content: "hi" }]);
    expect(req.chat_template_kwargs).toEqual({ enable_thinking: false });
    expect(req.response_format).toEqual({ type: "json_schema", json_schema: { name: "out", schema: { type: "object" }, strict: false } });
  });

  it("refuses a wrong shape", () => {
    expect(() => responses.toChat({ model: "m", input: 5 }, ctx)).toThrow(/input/);
    expect(() => responses.toChat({ model: "m", input: [{ type: "message", content: "x" }] }, ctx)).toThrow(/input\.0\.role/);
  });
});

const answer = (message: Record<string, unknown>, finish = "tool_calls"): ChatResponse => ({
  id: "chatcmpl-1", object: "chat.completion", created: 5, model: "Qwen/Qwen3-8B",
  choices: [{ index: 0, message: { role: "assistant", content: null, ...message }, finish_reason: finish }],
  usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 },
});

describe("Responses answer conversion", () => {
  it("maps calls back to the kind the client declared", () => {
    const r = responses.fromChat(answer({
      reasoning_content: "think",
      tool_calls: [
        { id: "x1", type: "function", function: { name: "agents__spawn", arguments: "{\"task\":\"t\"}" } },
        { id: "x2", type: "function", function: { name: "apply_patch", arguments: "{\"input\":\"*** Begin Patch\"}" } },
        { id: "call_x3", type: "function", function: { name: "exec_command", arguments: "{\"cmd\":\"ls\"}" } },
      ],
    }), codexTurn2, ctx) as any;
    expect(r.output.map((o: any) => o.type)).toEqual(["reasoning", "function_call", "custom_tool_call", "function_call"]);
    expect(r.output[0].encrypted_content).toBe(encodeReasoning("think"));
    expect(r.output[1]).toMatchObject({ name: "spawn", namespace: "agents", arguments: "{\"task\":\"t\"}" });
    expect(r.output[2]).toMatchObject({ name: "apply_patch", input: "*** Begin Patch" });
    expect(r.output[3]).toMatchObject({ name: "exec_command", call_id: "call_x3" });
    expect(r).toMatchObject({ object: "response", status: "completed", model: "gpt-x", usage: { input_tokens: 10, output_tokens: 4, total_tokens: 14 } });
  });

  it("marks a length stop incomplete", () => {
    const r = responses.fromChat(answer({ content: "partial" }, "length"), { input: "x" }, ctx) as any;
    expect(r.status).toBe("incomplete");
    expect(r.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(r.output[0].content[0].text).toBe("partial");
  });
});
