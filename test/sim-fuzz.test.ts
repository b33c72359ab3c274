/**
 * Malformed requests never crash the sim: every body gets a 200 or a
 * vLLM-style 400 with an error message, and the server keeps serving.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSim, type SimHandle } from "../src/sim/server.ts";

let sim: SimHandle;
beforeAll(async () => {
  sim = await startSim({ maxModelLen: 4096 });
});
afterAll(() => sim.stop());

const role = fc.constantFrom("system", "user", "assistant", "tool", "developer", "weird", 3);
const content = fc.oneof(fc.string(), fc.constant(null), fc.integer(), fc.array(fc.oneof(fc.record({ type: fc.constant("text"), text: fc.string() }), fc.string(), fc.integer())), fc.object());
const toolCall = fc.record({ id: fc.string(), type: fc.constant("function"), function: fc.record({ name: fc.oneof(fc.string(), fc.integer()), arguments: fc.oneof(fc.string(), fc.json(), fc.object()) }) });
const message = fc.record({ role, content, tool_calls: fc.option(fc.array(toolCall, { maxLength: 2 })), reasoning_content: fc.option(fc.oneof(fc.string(), fc.integer())) }, { requiredKeys: ["role"] });
const body = fc.record(
  {
    model: fc.oneof(fc.string(), fc.integer()),
    messages: fc.oneof(fc.array(message, { maxLength: 4 }), fc.string(), fc.constant(null)),
    tools: fc.option(fc.oneof(fc.array(fc.object(), { maxLength: 2 }), fc.string())),
    tool_choice: fc.option(fc.oneof(fc.constantFrom("auto", "none", "required"), fc.object())),
    max_tokens: fc.option(fc.oneof(fc.integer({ min: -5, max: 5000 }), fc.string())),
    top_logprobs: fc.option(fc.integer({ min: -2, max: 30 })),
    logprobs: fc.option(fc.boolean()),
    stream: fc.option(fc.boolean()),
    n: fc.option(fc.integer({ min: -1, max: 3 })),
    stop: fc.option(fc.oneof(fc.string(), fc.array(fc.string(), { maxLength: 2 }))),
    chat_template_kwargs: fc.option(fc.oneof(fc.object(), fc.string())),
  },
  { requiredKeys: [] },
);

describe("sim robustness", () => {
  it("answers every malformed chat request with 200 or a 400 error body", { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const r = await fetch(`${sim.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(b) });
        const text = await r.text();
        expect([200, 400]).toContain(r.status);
        if (r.status === 400) {
          const e = JSON.parse(text) as { error: { message: string; code: number; type: string } };
          expect(e.error.code).toBe(400);
          expect(e.error.message.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 300, seed: 42 },
    );
    for (const path of ["/v1/completions", "/generate", "/tokenize", "/detokenize", "/admin/policy_version"]) {
      for (const raw of ["[]", "null", '{"prompt": {}}', '{"text": 5}', '{"input_ids": [-1]}', '{"tokens": "x"}', "\"s\""]) {
        const r = await fetch(`${sim.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: raw });
        expect(r.status, `${path} ${raw}`).toBe(400);
      }
    }
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
  });
});
