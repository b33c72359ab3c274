/**
 * Gemini CLI's model-router call, as captured from the real CLI, through the
 * real proxy to the real simulator: `responseMimeType: application/json` with
 * `responseJsonSchema` (or the OpenAPI-style `responseSchema`) reaches the
 * engine as `response_format` json_schema, the answer text is JSON the CLI
 * accepts on the first try, and the record is marked a side call.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { CompletionRecord } from "../src/protocol/schemas.ts";
import { startProxy, type ProxyHandle } from "../src/proxy/index.ts";
import { startSim, type SimHandle } from "../src/sim/server.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";
import { silentLogger } from "../src/util/log.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const FIXTURE = fileURLToPath(new URL("../../shared/fixtures/harness-requests/gemini-automodel.jsonl", import.meta.url));
const captured: Json[] = readFileSync(FIXTURE, "utf8").trim().split("\n").map((l) => JSON.parse(l));
const routerCall = captured.find((c) => c.path.endsWith(":generateContent") && c.body.generationConfig?.responseMimeType === "application/json");
/** Gemini CLI's own check of the router's answer (ClassifierResponseSchema). */
const ROUTER_CHECK = z.object({ complexity_reasoning: z.string(), complexity_score: z.number().min(1).max(100) });

describe("Gemini CLI's model router through proxy and sim", () => {
  let sim: SimHandle;
  let proxy: ProxyHandle;
  const records: CompletionRecord[] = [];
  beforeAll(async () => {
    sim = await startSim({});
    const session = { sessionId: "s1", taskId: "t1", attempt: 1, metadata: {}, active: true };
    proxy = await startProxy(
      { sessions: { lookup: (c) => (c === "key" ? session : undefined) }, sink: { record: async (_s, r) => void records.push(r) }, log: silentLogger() },
      { host: "127.0.0.1", port: 0, upstreams: [sim.url], flavor: "vllm", modelServed: "Qwen/Qwen3-8B", maxBodyBytes: 8 << 20, upstreamTimeoutMs: 30_000 },
    );
  });
  afterAll(async () => {
    await proxy.stop();
    await sim.stop();
  });

  async function send(body: Json): Promise<{ text: string; thought: string; rec: Json }> {
    const r = await fetch(`${proxy.url}${routerCall.path}`, { method: "POST", headers: { "content-type": "application/json", "x-goog-api-key": "key" }, body: JSON.stringify(body) });
    expect(r.status).toBe(200);
    const resp = (await r.json()) as Json;
    const parts: Json[] = resp.candidates[0].content.parts;
    // What Gemini CLI reads: the non-thought text parts, trimmed (getResponseText).
    const text = parts.filter((p) => p.text && !p.thought).map((p) => p.text).join("").trim();
    const thought = parts.filter((p) => p.thought).map((p) => p.text).join("");
    return { text, thought, rec: records.at(-1) };
  }

  it("the captured router request: schema-valid JSON on the first try, recorded as a side call with the sim's tokens", async () => {
    expect(routerCall).toBeDefined();
    const { text, rec } = await send(routerCall.body);
    const value = JSON.parse(text);
    expect(ROUTER_CHECK.parse(value)).toEqual(value);
    expect(rec.metadata).toMatchObject({ completion_role: "side", side_kind: "router", model_requested: routerCall.path.match(/models\/([^:]+)/)[1] });
    expect(rec.request.response_format).toEqual({
      type: "json_schema",
      json_schema: {
        name: "google_response",
        schema: {
          type: "object",
          properties: {
            complexity_reasoning: { type: "string", description: "Brief explanation for the score." },
            complexity_score: { type: "integer", description: "Complexity score from 1-100." },
          },
          required: ["complexity_reasoning", "complexity_score"],
        },
      },
    });
    // The recorded ids are the sim's: the prompt renders from the converted messages, the output decodes to the JSON.
    const tok = qwen3Tokenizer();
    expect(rec.response.prompt_token_ids).toEqual(tok.tokenizeChat(rec.request.messages, { chatTemplateKwargs: rec.request.chat_template_kwargs ?? null }));
    const out = tok.decode(rec.response.choices[0].token_ids);
    expect(out.endsWith(`${text}<|im_end|>`)).toBe(true);
    expect(out.startsWith("<think>")).toBe(true);
  });

  it("OpenAPI-style responseSchema (upper-case types, enum) and a bare JSON mime type", async () => {
    const gc = { responseMimeType: "application/json", responseSchema: { type: "OBJECT", properties: { pick: { type: "STRING", enum: ["flash", "pro"] }, n: { type: "INTEGER", minimum: 3, maximum: 4 } }, required: ["pick", "n"] } };
    const body = { ...routerCall.body, generationConfig: gc };
    const a = await send(body);
    expect(z.object({ pick: z.enum(["flash", "pro"]), n: z.number().int().min(3).max(4) }).strict().parse(JSON.parse(a.text))).toBeTruthy();
    expect(a.rec.metadata.side_kind).toBe("router");
    const b = await send({ ...routerCall.body, generationConfig: { responseMimeType: "application/json" } });
    expect(b.rec.request.response_format).toEqual({ type: "json_object" });
    expect(typeof JSON.parse(b.text)).toBe("object");
  });
});
