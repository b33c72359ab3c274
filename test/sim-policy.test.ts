/**
 * Policies: playbook steps mapped onto each harness's shell and write tools,
 * seeded alternatives whose token logprobs sum to ln(p), per-session variety,
 * the random policy, and per-model policy choice.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSim, type SimHandle } from "../src/sim/server.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const fn = (name: string, properties: Record<string, unknown>) => ({ type: "function", function: { name, description: name, parameters: { type: "object", properties } } });
const COIN = [{ role: "user", content: "Please flip a coin into `coin.txt`." }];

let sim: SimHandle;
const dir = mkdtempSync(join(tmpdir(), "sim-policy-"));
beforeAll(async () => {
  const playbook = join(dir, "pb.json");
  writeFileSync(
    playbook,
    JSON.stringify({
      rules: [
        {
          match: "flip a coin into `(?<path>[^`]+)`",
          steps: [{ think: "Heads or tails.", choose: [{ p: 0.7, run: "echo heads > $<path>" }, { p: 0.3, run: "echo tails > $<path>" }] }, { answer: "flipped $1" }],
        },
        { match: "save `(?<text>[^`]*)` in `(?<path>[^`]+)`", steps: [{ write: { path: "$<path>", content: "$<text>" } }] },
      ],
    }),
  );
  sim = await startSim({ playbookPath: playbook, modelPolicies: { "load-model": "random" }, randomTokens: 20 });
});
afterAll(() => sim.stop());

async function chat(body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Json> {
  const r = await fetch(`${sim.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "Qwen/Qwen3-8B", return_token_ids: true, logprobs: true, ...body }),
  });
  expect(r.status).toBe(200);
  return r.json();
}

const call = (b: Json) => b.choices[0].message.tool_calls[0]?.function;

describe("sim script policy", () => {
  it("samples alternatives by seed with logprobs summing to ln(p)", async () => {
    const tools = [fn("bash", { command: { type: "string" } })];
    const counts = { heads: 0, tails: 0 };
    for (let seed = 0; seed < 200; seed++) {
      const b = await chat({ messages: COIN, tools, seed });
      const args = JSON.parse(call(b).arguments);
      const side = args.command.includes("heads") ? "heads" : "tails";
      counts[side]++;
      const sum = b.choices[0].logprobs.content.reduce((a: number, e: Json) => a + e.logprob, 0);
      expect(sum).toBeCloseTo(Math.log(side === "heads" ? 0.7 : 0.3), 9);
    }
    expect(counts.heads / 200).toBeGreaterThan(0.6);
    expect(counts.heads / 200).toBeLessThan(0.8);
    const again = await chat({ messages: COIN, tools, seed: 7 });
    expect((await chat({ messages: COIN, tools, seed: 7 })).choices[0].token_ids).toEqual(again.choices[0].token_ids);
  });

  it("varies by session identity without a seed, and follows the step index", async () => {
    const tools = [fn("bash", { command: { type: "string" } })];
    const sides = new Set<string>();
    for (let i = 0; i < 20; i++) sides.add(call(await chat({ messages: COIN, tools }, { "x-polar-session-id": `s${i}` })).arguments);
    expect(sides.size).toBe(2);
    const first = await chat({ messages: COIN, tools }, { "x-polar-session-id": "s1" });
    const msg = first.choices[0].message;
    const second = await chat({ tools, messages: [...COIN, msg, { role: "tool", tool_call_id: msg.tool_calls[0].id, content: "" }] }, { "x-polar-session-id": "s1" });
    expect(second.choices[0].message.content).toBe("\n\nflipped coin.txt");
    expect(second.choices[0].finish_reason).toBe("stop");
  });

  it("maps run and write onto whatever shell and write tools are offered", async () => {
    const cases: Array<[Json[], string, Record<string, unknown>]> = [
      [[fn("exec_command", { cmd: { type: "string" }, workdir: { type: "string" } })], "exec_command", { cmd: "echo heads > coin.txt" }],
      [[fn("shell", { command: { type: "array" } })], "shell", { command: ["bash", "-lc", "echo heads > coin.txt"] }],
      [[fn("read_file", { file_path: {} }), fn("run_shell_command", { command: { type: "string" } })], "run_shell_command", { command: "echo heads > coin.txt" }],
      [[fn("Bash", { command: { type: "string" }, timeout: { type: "number" } })], "Bash", { command: "echo heads > coin.txt" }],
    ];
    for (const [tools, name, args] of cases) {
      const b = await chat({ messages: COIN, tools, seed: 1 });
      expect(call(b).name).toBe(name);
      expect(JSON.parse(call(b).arguments)).toEqual(args);
    }
    const save = [{ role: "user", content: "save `it's 1` in `out dir/a.txt`" }];
    const viaWrite = await chat({ messages: save, tools: [fn("bash", { command: {} }), fn("write", { path: {}, content: {} })] });
    expect(call(viaWrite)).toEqual({ name: "write", arguments: '{"path": "out dir/a.txt", "content": "it\'s 1"}' });
    const viaShell = await chat({ messages: save, tools: [fn("bash", { command: { type: "string" } })] });
    expect(JSON.parse(call(viaShell).arguments).command).toBe(`printf '%s' 'it'\\''s 1' > 'out dir/a.txt'`);
    const noTools = await chat({ messages: save });
    expect(noTools.choices[0].message.tool_calls).toEqual([]);
    expect(noTools.choices[0].message.content).toContain("out dir/a.txt");
  });
});

describe("sim random policy", () => {
  it("gives random words of the requested length with uniform logprobs, by model name or per request", async () => {
    const tok = qwen3Tokenizer();
    const b = await chat({ model: "load-model", messages: [{ role: "user", content: "go" }], max_tokens: 50 });
    const ids: number[] = b.choices[0].token_ids;
    expect(ids).toHaveLength(50);
    expect(ids.at(-1)).toBe(151645);
    expect(b.choices[0].finish_reason).toBe("stop");
    const lps = b.choices[0].logprobs.content.map((e: Json) => e.logprob);
    expect(new Set(lps).size).toBe(1);
    expect(lps[0]).toBeLessThan(-4);
    expect(tok.encode(b.choices[0].message.content)).toEqual(ids.slice(0, -1));
    const ignore = await chat({ messages: [{ role: "user", content: "go" }], max_tokens: 30, ignore_eos: true, policy: "random" });
    expect(ignore.choices[0].token_ids).toHaveLength(30);
    expect(ignore.choices[0].token_ids).not.toContain(151645);
    expect(ignore.choices[0].finish_reason).toBe("length");
    const byHeader = await chat({ messages: [{ role: "user", content: "go" }] }, { "x-sim-policy": "random" });
    expect(byHeader.choices[0].token_ids).toHaveLength(20);
  });
});

describe("sim sampling without seed or session", () => {
  it("repeats by default, and with unkeyed=arrival diverges across identical requests and repeats on a fresh server", async () => {
    const tools = [fn("bash", { command: { type: "string" } })];
    const run = async (s: SimHandle) => {
      const out: string[] = [];
      for (let i = 0; i < 20; i++) {
        const r = await fetch(`${s.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", messages: COIN, tools }),
        });
        out.push(((await r.json()) as Json).choices[0].message.tool_calls[0].function.arguments);
      }
      return out;
    };
    const pb = join(dir, "pb.json");
    const fixed = await startSim({ playbookPath: pb, seed: 1 });
    try {
      expect(new Set(await run(fixed)).size).toBe(1);
    } finally {
      await fixed.stop();
    }
    const a = await startSim({ playbookPath: pb, seed: 1, unkeyed: "arrival" });
    const b = await startSim({ playbookPath: pb, seed: 1, unkeyed: "arrival" });
    try {
      const first = await run(a);
      expect(new Set(first).size).toBe(2);
      expect(await run(b)).toEqual(first);
    } finally {
      await a.stop();
      await b.stop();
    }
  });
});

