import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CRED, parseSse, startStack, type Stack } from "./proxy-setup.ts";

const tools: OpenAI.Responses.Tool[] = [
  { type: "function", name: "exec_command", description: "Runs a command", strict: false, parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] } },
  { type: "web_search" } as any,
];
const ARGS = JSON.stringify({ cmd: "echo hello > hello.txt" });
const REASONING = "The user wants hello.txt; exec_command writes it in one step.";

describe("OpenAI Responses through the proxy", () => {
  let stack: Stack;
  let client: OpenAI;
  beforeAll(async () => {
    stack = await startStack({
      reply: (body) => {
        const msgs = body.messages as { role: string }[];
        if (msgs.at(-1)?.role === "tool") return { content: "done" };
        return { content: "Running it.", reasoning: REASONING, toolCalls: [{ name: "exec_command", arguments: ARGS }] };
      },
    });
    client = new OpenAI({ baseURL: `${stack.proxy.url}/v1`, apiKey: CRED, maxRetries: 0 });
  });
  afterAll(() => stack.stop());

  const ask = {
    model: "gpt-x", tools, reasoning: { summary: "auto" as const }, include: ["reasoning.encrypted_content" as const], store: false,
    input: [
      { type: "message" as const, role: "developer" as const, content: [{ type: "input_text" as const, text: "You are a coding agent." }] },
      { type: "message" as const, role: "user" as const, content: [{ type: "input_text" as const, text: "make hello.txt" }] },
    ],
  };

  function expectCaptured() {
    const rec = stack.records.at(-1)!.record as any;
    const up = stack.engine.answers.at(-1)! as any;
    expect(rec.api_type).toBe("openai_responses");
    expect(rec.response.prompt_token_ids).toEqual(up.prompt_token_ids);
    expect(rec.response.choices[0].token_ids).toEqual(up.choices[0].token_ids);
    expect(rec.response.choices[0].logprobs.content.map((c: any) => c.logprob)).toEqual(up.choices[0].logprobs.content.map((c: any) => c.logprob));
    expect(rec.request.messages[0]).toEqual({ role: "system", content: "You are a coding agent." });
    expect(rec.request.tools.map((t: any) => t.function.name)).toEqual(["exec_command"]);
    expect(rec.request.chat_template_kwargs).toEqual({ enable_thinking: true });
    return { rec, up };
  }

  function expectOutput(r: OpenAI.Responses.Response) {
    expect(r.status).toBe("completed");
    expect(r.model).toBe("gpt-x");
    expect(r.output.map((o) => o.type)).toEqual(["reasoning", "message", "function_call"]);
    const reasoning = r.output[0] as OpenAI.Responses.ResponseReasoningItem;
    expect(reasoning.summary[0].text).toBe(REASONING);
    expect(reasoning.encrypted_content).toMatch(/^polar:/);
    expect(r.output_text).toBe("Running it.");
    const fc = r.output[2] as OpenAI.Responses.ResponseFunctionToolCall;
    expect(fc.name).toBe("exec_command");
    expect(fc.arguments).toBe(ARGS);
    expect(fc.call_id).toMatch(/^call_/);
    return { reasoning, fc };
  }

  it("creates a response with reasoning and a function call equal to the engine's answer", async () => {
    const r = await client.responses.create(ask);
    const { up } = expectCaptured();
    expectOutput(r);
    expect(r.usage?.input_tokens).toBe(up.usage.prompt_tokens);
    expect(r.usage?.output_tokens).toBe(up.usage.completion_tokens);
  });

  it("streams the same response through the SDK's strict accumulator", async () => {
    const stream = client.responses.stream(ask);
    const events: string[] = [];
    stream.on("event", (e) => events.push(e.type));
    const r = await stream.finalResponse();
    expectCaptured();
    expectOutput(r);
    expect(events[0]).toBe("response.created");
    expect(events.at(-1)).toBe("response.completed");
    expect(events.filter((e) => e === "response.output_item.done").length).toBe(3);
    expect(events.filter((e) => e === "response.function_call_arguments.delta").length).toBeGreaterThan(1);
    expect(events.filter((e) => e === "response.output_text.delta").length).toBeGreaterThan(0);
    expect(r.usage?.total_tokens).toBeGreaterThan(0);
  });

  it("numbers stream events and names them with event lines", async () => {
    const res = await fetch(`${stack.proxy.url}/v1/responses`, {
      method: "POST", headers: { authorization: `Bearer ${CRED}`, "content-type": "application/json" }, body: JSON.stringify({ ...ask, stream: true }),
    });
    const frames = parseSse(await res.text());
    const seqs = frames.map((f) => JSON.parse(f.data).sequence_number);
    expect(seqs).toEqual(frames.map((_, i) => i));
    for (const f of frames) expect(JSON.parse(f.data).type).toBe(f.event);
  });

  it("hands reasoning and the call back as one assistant turn on the next request", async () => {
    const first = await client.responses.create(ask);
    const { fc } = expectOutput(first);
    const r = await client.responses.create({
      ...ask,
      input: [...ask.input, ...(first.output as any[]), { type: "function_call_output", call_id: fc.call_id, output: "exit 0" }],
    });
    expect(r.output_text).toBe("done");
    const req = stack.records.at(-1)!.record.request as any;
    expect(req.messages.map((m: any) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(req.messages[2]).toMatchObject({ content: "Running it.", reasoning_content: REASONING });
    expect(req.messages[2].tool_calls[0]).toEqual({ id: fc.call_id, type: "function", function: { name: "exec_command", arguments: ARGS } });
    expect(req.messages[3]).toEqual({ role: "tool", tool_call_id: fc.call_id, content: "exit 0" });
  });
});
