import { GoogleGenAI, type Content } from "@google/genai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";
import { CRED, CRED_DONE, parseSse, startStack, type Stack } from "./proxy-setup.ts";

const ARGS = { command: "echo hello > hello.txt" };
const config = {
  tools: [{ functionDeclarations: [{ name: "run_shell_command", description: "Runs a command", parametersJsonSchema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } }] }],
  thinkingConfig: { includeThoughts: true },
  systemInstruction: "You are a CLI agent.",
};

describe("Google generateContent through the proxy", () => {
  let stack: Stack;
  let ai: GoogleGenAI;
  beforeAll(async () => {
    stack = await startStack({
      reply: (body) => {
        const msgs = body.messages as { role: string }[];
        if (msgs.at(-1)?.role === "tool") return { content: "done, the file holds hello" };
        return { content: "Running the command.", reasoning: "One shell call writes the file.", toolCalls: [{ name: "run_shell_command", arguments: JSON.stringify(ARGS) }] };
      },
    });
    ai = new GoogleGenAI({ apiKey: CRED, httpOptions: { baseUrl: stack.proxy.url } });
  });
  afterAll(() => stack.stop());

  const contents: Content[] = [{ role: "user", parts: [{ text: "make hello.txt" }] }];

  function expectCaptured() {
    const rec = stack.records.at(-1)!.record as any;
    const up = stack.engine.answers.at(-1)! as any;
    expect(rec.api_type).toBe("google");
    expect(rec.response.prompt_token_ids).toEqual(up.prompt_token_ids);
    expect(rec.response.choices[0].token_ids).toEqual(up.choices[0].token_ids);
    expect(rec.response.choices[0].logprobs.content.map((c: any) => c.logprob)).toEqual(up.choices[0].logprobs.content.map((c: any) => c.logprob));
    expect(rec.request.messages[0]).toEqual({ role: "system", content: "You are a CLI agent." });
    expect(rec.request.chat_template_kwargs).toEqual({ enable_thinking: true });
    expect(rec.metadata.model_requested).toBe("gemini-x");
    return { rec, up };
  }

  it("generates content with a function call equal to the engine's answer", async () => {
    const r = await ai.models.generateContent({ model: "gemini-x", contents, config });
    const { up } = expectCaptured();
    expect(r.functionCalls).toEqual([{ id: up.choices[0].message.tool_calls[0].id, name: "run_shell_command", args: ARGS }]);
    const parts = r.candidates![0].content!.parts!;
    expect(parts[0]).toEqual({ text: "One shell call writes the file.", thought: true });
    expect(parts[1]).toEqual({ text: "Running the command." });
    expect(r.candidates![0].finishReason).toBe("STOP");
    expect(r.usageMetadata?.promptTokenCount).toBe(up.usage.prompt_tokens);
    expect(r.usageMetadata?.candidatesTokenCount).toBe(up.usage.completion_tokens);
  });

  it("streams the same answer with generateContentStream", async () => {
    const chunks = [];
    for await (const c of await ai.models.generateContentStream({ model: "gemini-x", contents, config })) chunks.push(c);
    const { up } = expectCaptured();
    expect(chunks.length).toBeGreaterThan(2);
    const text = chunks.flatMap((c) => c.candidates?.[0]?.content?.parts ?? []).filter((p) => p.text && !p.thought).map((p) => p.text).join("");
    expect(text).toBe("Running the command.");
    const thoughts = chunks.flatMap((c) => c.candidates?.[0]?.content?.parts ?? []).filter((p) => p.thought).map((p) => p.text).join("");
    expect(thoughts).toBe(up.choices[0].message.reasoning);
    const last = chunks.at(-1)!;
    expect(last.functionCalls?.[0]).toMatchObject({ name: "run_shell_command", args: ARGS });
    expect(last.candidates![0].content!.parts![0].thoughtSignature).toBeTruthy();
    expect(last.candidates![0].finishReason).toBe("STOP");
    expect(last.usageMetadata?.totalTokenCount).toBe(up.usage.total_tokens);
  });

  it("turns function responses into tool messages paired with their calls", async () => {
    const r = await ai.models.generateContent({
      model: "gemini-x", config,
      contents: [
        ...contents,
        { role: "model", parts: [{ functionCall: { name: "run_shell_command", args: ARGS }, thoughtSignature: "skip_thought_signature_validator" }] },
        { role: "user", parts: [{ functionResponse: { name: "run_shell_command", response: { output: "(empty)" } } }] },
      ],
    });
    expect(r.text).toBe("done, the file holds hello");
    const req = stack.records.at(-1)!.record.request as any;
    const call = req.messages[2].tool_calls[0];
    expect(call.function).toEqual({ name: "run_shell_command", arguments: JSON.stringify(ARGS) });
    expect(req.messages[3]).toEqual({ role: "tool", tool_call_id: call.id, content: JSON.stringify({ output: "(empty)" }) });
  });

  it("the thoughtSignature carries the reasoning back when the client drops the thought part (as Gemini CLI does)", async () => {
    const first = await ai.models.generateContent({ model: "gemini-x", contents, config });
    const { rec: firstRec, up } = expectCaptured();
    const parts = first.candidates![0].content!.parts!;
    const call = parts.find((p) => p.functionCall)!;
    expect(call.thoughtSignature).toMatch(/^polar:/);
    // Gemini CLI keeps only the non-thought parts of a model turn in its history.
    const history = parts.filter((p) => !p.thought);
    await ai.models.generateContent({
      model: "gemini-x", config,
      contents: [...contents, { role: "model", parts: history }, { role: "user", parts: [{ functionResponse: { id: call.functionCall!.id, name: "run_shell_command", response: { output: "" } } }] }],
    });
    const req = stack.records.at(-1)!.record.request as any;
    expect(req.messages[2]).toMatchObject({ role: "assistant", content: "Running the command.", reasoning_content: up.choices[0].message.reasoning });
    // So with the real Qwen3 template the new prompt starts with the previous prompt and the
    // sampled reasoning: the two calls form one chain.
    const tok = qwen3Tokenizer();
    const render = (r: any) => tok.tokenizeChat(r.messages, { tools: r.tools, chatTemplateKwargs: r.chat_template_kwargs });
    const prompt = render(req);
    const prev = render(firstRec.request);
    expect(prompt.slice(0, prev.length)).toEqual(prev);
    const think = tok.encode(`<think>\n${up.choices[0].message.reasoning}\n</think>`);
    expect(prompt.slice(prev.length, prev.length + think.length)).toEqual(think);
    // A signature we did not make (or one without reasoning) restores nothing.
    await ai.models.generateContent({
      model: "gemini-x", config,
      contents: [...contents, { role: "model", parts: [{ functionCall: { name: "run_shell_command", args: ARGS }, thoughtSignature: "skip_thought_signature_validator" }] }, { role: "user", parts: [{ functionResponse: { name: "run_shell_command", response: {} } }] }],
    });
    expect((stack.records.at(-1)!.record.request as any).messages[2].reasoning_content).toBeUndefined();
  });

  it("counts tokens and refuses in Google's error format", async () => {
    const n = await ai.models.countTokens({ model: "gemini-x", contents });
    expect(n.totalTokens).toBeGreaterThan(0);
    const done = new GoogleGenAI({ apiKey: CRED_DONE, httpOptions: { baseUrl: stack.proxy.url } });
    await expect(done.models.generateContent({ model: "gemini-x", contents })).rejects.toMatchObject({ status: 403 });
    const res = await fetch(`${stack.proxy.url}/v1beta/models/gemini-x:generateContent`, { method: "POST", headers: { "x-goog-api-key": "nope", "content-type": "application/json" }, body: "{}" });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: { code: 401, message: "unknown session credential", status: "UNAUTHENTICATED" } });
  });

  it("streams one data frame per chunk with alt=sse", async () => {
    const res = await fetch(`${stack.proxy.url}/v1beta/models/gemini-x:streamGenerateContent?alt=sse`, {
      method: "POST", headers: { "x-goog-api-key": CRED, "content-type": "application/json" }, body: JSON.stringify({ contents }),
    });
    expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
    const frames = parseSse(await res.text());
    expect(frames.every((f) => f.event === undefined)).toBe(true);
    expect(JSON.parse(frames.at(-1)!.data).candidates[0].finishReason).toBe("STOP");
  });
});
