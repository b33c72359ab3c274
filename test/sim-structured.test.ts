/**
 * Structured output, as vLLM serves it: `response_format` json_schema /
 * json_object, vLLM's `structured_outputs` and `guided_json`/`guided_choice`,
 * SGLang's `sampling_params.json_schema`. The answer text must parse and
 * validate against the schema (checked with zod's independent JSON-schema
 * reader), reasoning stays as usual, no tool calls are parsed, and the token
 * logprobs sum to the log-probability of the draws.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { sampleJson } from "../src/sim/json-sampler.ts";
import { prng } from "../src/sim/rng.ts";
import { startSim, type SimHandle } from "../src/sim/server.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** Gemini CLI's model-router schema, after the proxy lower-cases Google's types. */
const ROUTER = {
  type: "object",
  properties: {
    complexity_reasoning: { type: "string", description: "Brief explanation for the score." },
    complexity_score: { type: "integer", description: "Complexity score from 1-100." },
  },
  required: ["complexity_reasoning", "complexity_score"],
};
/** What Gemini CLI checks the router's answer against. */
const ROUTER_CHECK = z.object({ complexity_reasoning: z.string(), complexity_score: z.number().min(1).max(100) });

const SCHEMAS: Record<string, Record<string, unknown>> = {
  router: ROUTER,
  nested: {
    type: "object",
    additionalProperties: false,
    properties: {
      verdict: { type: "string", enum: ["pass", "fail", "skip"] },
      confidence: { type: "number", minimum: 0, maximum: 1 },
      retries: { type: "integer", exclusiveMinimum: 2, exclusiveMaximum: 6 },
      done: { type: "boolean" },
      tags: { type: "array", items: { type: "string", maxLength: 10 }, minItems: 1, maxItems: 4 },
      owner: { type: "object", properties: { name: { type: "string", minLength: 20 }, id: { type: "string", format: "uuid" } }, required: ["name"] },
      note: { type: ["string", "null"] },
      kind: { const: "report" },
      when: { type: "string", format: "date-time" },
    },
    required: ["verdict", "confidence", "retries", "done", "tags", "owner", "kind"],
  },
  refs: {
    type: "object",
    $defs: { step: { type: "object", properties: { cmd: { type: "string" }, n: { type: "integer", minimum: -5, maximum: -1 } }, required: ["cmd", "n"] } },
    properties: {
      steps: { type: "array", items: { $ref: "#/$defs/step" }, minItems: 2, maxItems: 2 },
      choice: { anyOf: [{ type: "integer", minimum: 500, maximum: 600 }, { type: "string", enum: ["x", "y"] }] },
      pair: { type: "array", prefixItems: [{ type: "integer" }, { type: "boolean" }], items: false },
    },
    required: ["steps", "choice", "pair"],
  },
  list: { type: "array", items: { type: "number", multipleOf: 5, minimum: 10, maximum: 40 }, minItems: 3 },
};

const ROUTER_SYSTEM = "You are a specialized Task Routing AI. Assign a complexity_score from 1 to 100 and answer in JSON.";
const MESSAGES = [
  { role: "system", content: ROUTER_SYSTEM },
  { role: "user", content: "Run `ls` and tell me what is there." },
];

let sim: SimHandle;
beforeAll(async () => {
  sim = await startSim({});
});
afterAll(() => sim.stop());

async function post(path: string, body: Record<string, unknown>): Promise<{ status: number; json: Json }> {
  const r = await fetch(`${sim.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}

const chat = (body: Record<string, unknown>) => post("/v1/chat/completions", { model: "m", messages: MESSAGES, return_token_ids: true, logprobs: true, ...body });

describe("the JSON generator", () => {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    it(`${name}: 40 seeded values all validate, and the same seed gives the same value`, () => {
      const check = z.fromJSONSchema(schema as never);
      const seen = new Set<string>();
      for (let seed = 0; seed < 40; seed++) {
        const { value, logprob } = sampleJson(schema, prng("t", seed));
        const r = check.safeParse(value);
        expect(r.success, `${name} seed ${seed}: ${JSON.stringify(value)}\n${r.error?.message}`).toBe(true);
        expect(logprob).toBeLessThanOrEqual(0);
        expect(sampleJson(schema, prng("t", seed)).value).toEqual(value);
        seen.add(JSON.stringify(value));
      }
      expect(seen.size).toBeGreaterThan(20);
    });
  }

  it("router values satisfy Gemini CLI's own check (score 1..100) and every declared property is present", () => {
    for (let seed = 0; seed < 100; seed++) {
      const { value } = sampleJson(ROUTER, prng("router", seed));
      expect(ROUTER_CHECK.parse(value)).toEqual(value);
      expect(Object.keys(value as object)).toEqual(["complexity_reasoning", "complexity_score"]);
    }
    const nested = sampleJson(SCHEMAS.nested, prng("x")).value as Record<string, unknown>;
    expect(Object.keys(nested)).toEqual(Object.keys(SCHEMAS.nested.properties as object));
  });
});

describe("chat with response_format", () => {
  it("json_schema: content is JSON valid against the router schema, reasoning as usual, tokens and logprobs consistent", async () => {
    const { status, json } = await chat({ response_format: { type: "json_schema", json_schema: { name: "router", schema: ROUTER } } });
    expect(status).toBe(200);
    const [c] = json.choices;
    expect(c.finish_reason).toBe("stop");
    expect(c.message.tool_calls).toEqual([]);
    // The built-in playbook's think for "run `ls`" comes first, as it would without the constraint.
    expect(c.message.reasoning_content).toBe("\nI will run the command as asked.\n");
    const value = JSON.parse(c.message.content);
    expect(ROUTER_CHECK.parse(value)).toEqual(value);
    expect(c.message.content).toMatch(/^\n\n\{"complexity_reasoning": "[a-z ]+", "complexity_score": \d+\}$/);
    const tok = qwen3Tokenizer();
    expect(c.token_ids.at(-1)).toBe(tok.eotTokenId);
    expect(tok.decode(c.token_ids)).toBe(`<think>${c.message.reasoning_content}</think>${c.message.content}<|im_end|>`);
    // The draws: a word count, the words, a score in 1..100; their ln(p) is spread over the tokens.
    const sum = c.logprobs.content.reduce((a: number, e: Json) => a + e.logprob, 0);
    const words = value.complexity_reasoning.split(" ").length;
    expect(sum).toBeCloseTo(-Math.log(7) - words * Math.log(24) - Math.log(100), 6);
    // Deterministic for the same request; a different seed samples another value.
    const again = await chat({ response_format: { type: "json_schema", json_schema: { name: "router", schema: ROUTER } } });
    expect(again.json.choices[0].token_ids).toEqual(c.token_ids);
    const other = await chat({ seed: 7, response_format: { type: "json_schema", json_schema: { name: "router", schema: ROUTER } } });
    expect(other.json.choices[0].message.content).not.toBe(c.message.content);
  });

  it("an enum schema: the logprobs of the answer sum to ln(1/4); thinking off gives bare JSON", async () => {
    const schema = { type: "string", enum: ["alpha", "beta", "gamma", "delta"] };
    const { json } = await chat({ response_format: { type: "json_schema", json_schema: { name: "e", schema } }, chat_template_kwargs: { enable_thinking: false } });
    const [c] = json.choices;
    expect(schema.enum).toContain(JSON.parse(c.message.content));
    expect(c.message.content).toMatch(/^"[a-z]+"$/);
    expect(c.message.reasoning_content).toBeNull();
    const sum = c.logprobs.content.reduce((a: number, e: Json) => a + e.logprob, 0);
    expect(sum).toBeCloseTo(Math.log(1 / 4), 9);
  });

  it("json_object gives a small object; tools in the request yield no tool calls", async () => {
    const tools = [{ type: "function", function: { name: "bash", description: "run", parameters: { type: "object", properties: { command: { type: "string" } } } } }];
    const { json } = await chat({ response_format: { type: "json_object" }, tools });
    const [c] = json.choices;
    expect(c.finish_reason).toBe("stop");
    expect(c.message.tool_calls).toEqual([]);
    const v = JSON.parse(c.message.content);
    expect(Object.keys(v)).toEqual(["answer"]);
    expect(typeof v.answer).toBe("string");
    // Without the constraint the same request runs the playbook's command through the tool.
    const free = await chat({ tools });
    expect(free.json.choices[0].message.tool_calls[0].function.name).toBe("bash");
  });

  it("vLLM's structured_outputs (json, choice) and guided_json (as text) / guided_choice", async () => {
    const a = await chat({ structured_outputs: { json: SCHEMAS.refs } });
    expect(z.fromJSONSchema(SCHEMAS.refs as never).safeParse(JSON.parse(a.json.choices[0].message.content)).success).toBe(true);
    const b = await chat({ guided_json: JSON.stringify(ROUTER) });
    expect(ROUTER_CHECK.safeParse(JSON.parse(b.json.choices[0].message.content)).success).toBe(true);
    const c = await chat({ structured_outputs: { choice: ["yes", "no"] }, chat_template_kwargs: { enable_thinking: false } });
    expect(["yes", "no"]).toContain(c.json.choices[0].message.content);
    const d = await chat({ guided_choice: ["left", "right", "up"], chat_template_kwargs: { enable_thinking: false } });
    expect(["left", "right", "up"]).toContain(d.json.choices[0].message.content);
    const sum = d.json.choices[0].logprobs.content.reduce((x: number, e: Json) => x + e.logprob, 0);
    expect(sum).toBeCloseTo(Math.log(1 / 3), 9);
  });

  it("streaming: the content deltas join to the same JSON as the non-streamed answer", async () => {
    const body = { model: "m", messages: MESSAGES, response_format: { type: "json_schema", json_schema: { name: "r", schema: ROUTER } } };
    const full = await post("/v1/chat/completions", body);
    const r = await fetch(`${sim.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...body, stream: true }) });
    const text = await r.text();
    const chunks = text.split("\n\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)));
    const content = chunks.map((ch) => ch.choices[0]?.delta?.content ?? "").join("");
    expect(content).toBe(full.json.choices[0].message.content);
    expect(chunks.some((ch) => ch.choices[0]?.delta?.tool_calls)).toBe(false);
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe("stop");
  });

  it("max_tokens still truncates a constrained answer (finish_reason length)", async () => {
    const { json } = await chat({ max_tokens: 5, response_format: { type: "json_schema", json_schema: { name: "r", schema: ROUTER } } });
    expect(json.choices[0].finish_reason).toBe("length");
    expect(json.choices[0].token_ids).toHaveLength(5);
  });

  it("unsupported or malformed constraints are a 400 naming the field", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ response_format: { type: "json_schema", json_schema: { name: "x" } } }, "response_format.json_schema.schema"],
      [{ response_format: { type: "yaml" } }, "response_format.type"],
      [{ structured_outputs: { regex: "a+" } }, "structured_outputs.regex"],
      [{ guided_json: "{not json" }, "guided_json"],
      [{ guided_choice: [] }, "guided_choice"],
    ];
    for (const [extra, param] of cases) {
      const { status, json } = await chat(extra);
      expect(status, param).toBe(400);
      expect(json.error.param).toBe(param);
    }
  });
});

describe("other endpoints", () => {
  it("completions with response_format and SGLang /generate with sampling_params.json_schema", async () => {
    const a = await post("/v1/completions", { model: "m", prompt: "Score this:", max_tokens: 200, response_format: { type: "json_schema", json_schema: { name: "r", schema: ROUTER } } });
    expect(ROUTER_CHECK.safeParse(JSON.parse(a.json.choices[0].text)).success).toBe(true);
    const b = await post("/generate", { text: "Score this:", sampling_params: { max_new_tokens: 200, json_schema: JSON.stringify(SCHEMAS.nested) } });
    expect(z.fromJSONSchema(SCHEMAS.nested as never).safeParse(JSON.parse(b.json.text)).success).toBe(true);
    const c = await post("/generate", { text: "x", sampling_params: { regex: "a+" } });
    expect(c.status).toBe(400);
  });
});
