/**
 * The proxy in front of the real inference simulator (real Qwen3 tokenizer and
 * template), with a recording pass-through between them: every SDK's tool
 * loop must store exactly the ids and logprobs the engine sent.
 */
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import { createServer, type Server } from "node:http";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CompletionRecord } from "../src/protocol/schemas.ts";
import { startProxy, type ProxyHandle, type UpstreamFlavor } from "../src/proxy/index.ts";
import { startSim, type SimHandle } from "../src/sim/server.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";
import { silentLogger } from "../src/util/log.ts";

const TASK = "Run the shell command `echo hello > hello.txt` in the current directory, then reply with the single word done.";

/** A pass-through that keeps every JSON answer of the engine. */
async function startTee(target: string): Promise<{ url: string; answers: any[]; server: Server }> {
  const answers: any[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const up = await fetch(target + req.url, { method: req.method, headers: { "content-type": "application/json" }, body: req.method === "POST" ? Buffer.concat(chunks) : undefined });
    const text = await up.text();
    if (req.url?.endsWith("/chat/completions")) answers.push(JSON.parse(text));
    res.writeHead(up.status, { "content-type": up.headers.get("content-type") ?? "application/json" });
    res.end(text);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, answers, server };
}

for (const flavor of ["vllm", "sglang"] as UpstreamFlavor[]) {
  describe(`proxy + simulator (${flavor} flavor)`, () => {
    let sim: SimHandle;
    let tee: Awaited<ReturnType<typeof startTee>>;
    let proxy: ProxyHandle;
    const records: CompletionRecord[] = [];
    beforeAll(async () => {
      sim = await startSim({});
      tee = await startTee(sim.url);
      const session = { sessionId: "s1", taskId: "t1", attempt: 1, metadata: {}, active: true };
      proxy = await startProxy(
        { sessions: { lookup: (c) => (c === "key" ? session : undefined) }, sink: { record: async (_s, r) => void records.push(r) }, log: silentLogger() },
        { host: "127.0.0.1", port: 0, upstreams: [tee.url], flavor, modelServed: "Qwen/Qwen3-8B", maxBodyBytes: 8 << 20, upstreamTimeoutMs: 30_000 },
      );
    });
    afterAll(async () => {
      await proxy.stop();
      await new Promise((r) => tee.server.close(r));
      await sim.stop();
    });

    const upstreamContent = (): string => tee.answers.at(-1)!.choices[0].message.content;

    /** The last record holds exactly the engine's ids and logprobs, and its prompt ids are the template's. */
    function expectFaithful(): any {
      const rec = records.at(-1)! as any;
      const up = tee.answers.at(-1)!;
      const ch = up.choices[0];
      const ids = ch.token_ids;
      expect(ids.length).toBeGreaterThan(0);
      expect(rec.response.choices[0].token_ids).toEqual(ids);
      expect(rec.response.prompt_token_ids).toEqual(up.prompt_token_ids ?? ch.prompt_token_ids);
      expect(rec.response.choices[0].logprobs.content.map((c: any) => c.logprob)).toEqual(ch.logprobs.content.map((c: any) => c.logprob));
      expect(rec.response.choices[0].logprobs.content.map((c: any) => c.token_id)).toEqual(ids);
      const tok = qwen3Tokenizer();
      const rendered = tok.tokenizeChat(rec.request.messages, { tools: rec.request.tools ?? null, chatTemplateKwargs: rec.request.chat_template_kwargs ?? null });
      expect(rec.response.prompt_token_ids).toEqual(rendered);
      return rec;
    }

    it("OpenAI chat: streamed tool loop", async () => {
      const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: "key", maxRetries: 0 });
      const tools = [{ type: "function" as const, function: { name: "bash", parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } } }];
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: TASK }];
      const first = await client.chat.completions.stream({ model: "m", messages, tools }).finalChatCompletion();
      const call = first.choices[0].message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(JSON.parse(call.function.arguments)).toEqual({ command: "echo hello > hello.txt" });
      expect(first.choices[0].finish_reason).toBe("tool_calls");
      expectFaithful();
      messages.push(first.choices[0].message as OpenAI.ChatCompletionMessageParam, { role: "tool", tool_call_id: call.id, content: "" });
      const second = await client.chat.completions.stream({ model: "m", messages, tools }).finalChatCompletion();
      expectFaithful();
      expect(second.choices[0].message.content).toBe(upstreamContent());
      expect(upstreamContent().trim()).toBe("done");
    });

    it("Anthropic: streamed tool loop with thinking", async () => {
      const client = new Anthropic({ baseURL: proxy.url, apiKey: "key", maxRetries: 0 });
      const tools = [{ name: "Bash", input_schema: { type: "object" as const, properties: { command: { type: "string" } }, required: ["command"] } }];
      const base = { model: "claude-x", max_tokens: 1024, tools, thinking: { type: "adaptive" } as any };
      const messages: Anthropic.MessageParam[] = [{ role: "user", content: TASK }];
      const first = await client.messages.stream({ ...base, messages }).finalMessage();
      const tu = first.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
      expect(tu.input).toEqual({ command: "echo hello > hello.txt" });
      expect(first.content[0].type).toBe("thinking");
      const rec = expectFaithful();
      // count_tokens renders the same prompt (the engine has no /tokenize: the local template counts).
      const counted = await client.messages.countTokens({ model: "claude-x", tools, thinking: base.thinking, messages: [{ role: "user", content: TASK }] });
      expect(counted.input_tokens).toBe(rec.response.prompt_token_ids.length);
      messages.push({ role: "assistant", content: first.content }, { role: "user", content: [{ type: "tool_result", tool_use_id: tu.id, content: "" }] });
      const second = await client.messages.stream({ ...base, messages }).finalMessage();
      expectFaithful();
      expect(second.content.filter((b) => b.type === "text").map((b: any) => b.text).join("")).toBe(upstreamContent());
    });

    it("Responses: streamed tool loop with reasoning", async () => {
      const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: "key", maxRetries: 0 });
      const tools: OpenAI.Responses.Tool[] = [{ type: "function", name: "exec_command", strict: false, parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] } }];
      const input: any[] = [{ role: "user", content: TASK }];
      const base = { model: "gpt-x", tools, reasoning: { summary: "auto" as const }, store: false };
      const first = await client.responses.stream({ ...base, input }).finalResponse();
      const fc = first.output.find((o) => o.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
      expect(JSON.parse(fc.arguments)).toEqual({ cmd: "echo hello > hello.txt" });
      expectFaithful();
      input.push(...first.output, { type: "function_call_output", call_id: fc.call_id, output: "" });
      const second = await client.responses.stream({ ...base, input }).finalResponse();
      expectFaithful();
      expect(second.output_text).toBe(upstreamContent());
    });

    it("Google: streamed tool loop", async () => {
      const ai = new GoogleGenAI({ apiKey: "key", httpOptions: { baseUrl: proxy.url } });
      const config = { tools: [{ functionDeclarations: [{ name: "run_shell_command", parametersJsonSchema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } }] }] };
      const contents: any[] = [{ role: "user", parts: [{ text: TASK }] }];
      const chunks = [];
      for await (const c of await ai.models.generateContentStream({ model: "gemini-x", contents, config })) chunks.push(c);
      const parts = chunks.flatMap((c) => c.candidates?.[0]?.content?.parts ?? []);
      const call = parts.find((p) => p.functionCall)!.functionCall!;
      expect(call.args).toEqual({ command: "echo hello > hello.txt" });
      expectFaithful();
      contents.push({ role: "model", parts }, { role: "user", parts: [{ functionResponse: { id: call.id, name: call.name, response: { output: "" } } }] });
      const second = await ai.models.generateContent({ model: "gemini-x", contents, config });
      expectFaithful();
      expect(second.candidates![0].content!.parts!.filter((p) => !p.thought).map((p) => p.text).join("")).toBe(upstreamContent());
    });
  });
}
