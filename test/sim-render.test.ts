/**
 * Pins the prompt token ids the sim renders for representative Qwen3
 * conversations (the ids vLLM renders with the same template and tokenizer;
 * the template text was cross-checked against Python jinja2 with HF's tojson),
 * and checks that earlier turns lose their thinking.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSim, type SimHandle } from "../src/sim/server.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";

const bashTool = {
  type: "function",
  function: { name: "bash", description: "Run a shell command", parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } },
};

const CONVERSATIONS = {
  plain: { messages: [{ role: "system", content: "You are terse." }, { role: "user", content: "Say hi." }] },
  toolUse: {
    tools: [bashTool],
    messages: [
      { role: "system", content: "You are a coding agent." },
      { role: "user", content: "List the files." },
      { role: "assistant", content: "", reasoning_content: "I should run ls.", tool_calls: [{ id: "call_1", type: "function", function: { name: "bash", arguments: '{"command":"ls"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "a.txt\nb.txt" },
    ],
  },
  multiTurn: {
    messages: [
      { role: "user", content: "What is 2+2?" },
      { role: "assistant", content: "4", reasoning_content: "Simple sum." },
      { role: "user", content: "And 3+3?" },
    ],
  },
  noThinking: { messages: [{ role: "user", content: "Hi" }], chat_template_kwargs: { enable_thinking: false } },
} as const;

const PINNED: Record<keyof typeof CONVERSATIONS, number[]> = {
  plain: [151644, 8948, 198, 2610, 525, 50537, 13, 151645, 198, 151644, 872, 198, 45764, 15588, 13, 151645, 198, 151644, 77091, 198],
  toolUse: [
    151644, 8948, 198, 2610, 525, 264, 10822, 8315, 382, 2, 13852, 271, 2610, 1231, 1618, 825, 476, 803, 5746, 311, 7789, 448, 279, 1196, 3239, 382, 2610,
    525, 3897, 448, 729, 32628, 2878, 366, 15918, 1472, 15918, 29, 11874, 9492, 510, 27, 15918, 397, 4913, 1313, 788, 330, 1688, 497, 330, 1688, 788, 5212,
    606, 788, 330, 46216, 497, 330, 4684, 788, 330, 6727, 264, 12528, 3210, 497, 330, 13786, 788, 5212, 1313, 788, 330, 1700, 497, 330, 13193, 788, 5212,
    5631, 788, 5212, 1313, 788, 330, 917, 9207, 2137, 330, 6279, 788, 4383, 5631, 1341, 3417, 532, 522, 15918, 1339, 2461, 1817, 729, 1618, 11, 470, 264,
    2951, 1633, 448, 729, 829, 323, 5977, 2878, 220, 151657, 151658, 11874, 9492, 510, 151657, 198, 4913, 606, 788, 366, 1688, 11494, 8066, 330, 16370, 788,
    366, 2116, 56080, 40432, 31296, 151658, 151645, 198, 151644, 872, 198, 852, 279, 3542, 13, 151645, 198, 151644, 77091, 198, 151667, 198, 40, 1265, 1598,
    19597, 624, 151668, 271, 151657, 198, 4913, 606, 788, 330, 46216, 497, 330, 16370, 788, 5212, 5631, 788, 330, 4730, 95642, 151658, 151645, 198, 151644,
    872, 198, 151665, 198, 64, 3909, 198, 65, 3909, 198, 151666, 151645, 198, 151644, 77091, 198,
  ],
  multiTurn: [151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198, 19, 151645, 198, 151644, 872, 198, 3036, 220, 18, 10, 18, 30, 151645, 198, 151644, 77091, 198],
  noThinking: [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271],
};

let sim: SimHandle;
beforeAll(async () => {
  sim = await startSim({});
});
afterAll(() => sim.stop());

async function chat(body: Record<string, unknown>) {
  const r = await fetch(`${sim.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "Qwen/Qwen3-8B", return_token_ids: true, ...body }) });
  expect(r.status).toBe(200);
  return (await r.json()) as { prompt_token_ids: number[]; choices: Array<{ token_ids: number[] }> };
}

describe("sim prompt rendering", () => {
  for (const [name, conv] of Object.entries(CONVERSATIONS)) {
    it(`pins the prompt ids of the ${name} conversation`, async () => {
      const body = await chat(conv);
      expect(body.prompt_token_ids).toEqual(PINNED[name as keyof typeof CONVERSATIONS]);
      const tok = qwen3Tokenizer();
      const c = conv as unknown as { messages: Record<string, unknown>[]; tools?: Record<string, unknown>[]; chat_template_kwargs?: Record<string, unknown> };
      expect(tok.tokenizeChat(c.messages, { tools: c.tools, chatTemplateKwargs: c.chat_template_kwargs })).toEqual(body.prompt_token_ids);
    });
  }

  it("keeps thinking after the last query and drops it from earlier turns", async () => {
    const tok = qwen3Tokenizer();
    const afterQuery = tok.decode(PINNED.toolUse);
    expect(afterQuery).toContain("<think>\nI should run ls.\n</think>\n\n<tool_call>");
    const multi = tok.decode(PINNED.multiTurn);
    expect(multi).not.toContain("Simple sum.");
    expect(multi).toContain("<|im_start|>assistant\n4<|im_end|>");
    // Turn 2's prompt does not extend turn 1's prompt + sampled output: the think block is gone.
    const first = await chat({ messages: [{ role: "user", content: "What is 2+2?" }] });
    const sampled = [...first.prompt_token_ids, ...first.choices[0].token_ids];
    expect(tok.decode(sampled)).toContain("<think>");
    expect(PINNED.multiTurn.slice(0, sampled.length)).not.toEqual(sampled);
    // A content string carrying its own <think> block is split the same way and also dropped.
    const inline = await chat({
      messages: [
        { role: "user", content: "What is 2+2?" },
        { role: "assistant", content: "<think>\nSimple sum.\n</think>\n\n4" },
        { role: "user", content: "And 3+3?" },
      ],
    });
    expect(inline.prompt_token_ids).toEqual(PINNED.multiTurn);
  });

  it("accepts reasoning as an alias of reasoning_content and maps reasoning_effort onto enable_thinking", async () => {
    const withAlias = await chat({
      tools: [bashTool],
      messages: CONVERSATIONS.toolUse.messages.map((m) => ("reasoning_content" in m ? { ...m, reasoning_content: undefined, reasoning: m.reasoning_content } : m)),
    });
    expect(withAlias.prompt_token_ids).toEqual(PINNED.toolUse);
    const effortNone = await chat({ messages: [{ role: "user", content: "Hi" }], reasoning_effort: "none" });
    expect(effortNone.prompt_token_ids).toEqual(PINNED.noThinking);
  });
});
