/**
 * Builder benchmark: an agent session of 51 turns whose final prompt is about
 * 32k tokens (ChatML-structured ids: system + tools, then per turn a sampled
 * answer with reasoning and a tool call, and a tool result), and the same
 * session at 2x and 4x turns. Prints median and p99 build times of
 * prefix_merging (goal: <= 20 ms at 51 turns, linear in total tokens),
 * per_request and verifyTrajectory, and ns per token side by side.
 */
import { buildPerRequest } from "../src/builders/per-request.ts";
import { buildPrefixMerging } from "../src/builders/prefix-merging.ts";
import { PrefixMergingConfig } from "../src/builders/prefix-merging-config.ts";
import { verifyTrajectory } from "../src/builders/verify.ts";
import type { CompletionRecord, CompletionSession } from "../src/protocol/schemas.ts";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

// A full collection before each timed series, so one series' garbage is not billed to the next.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const EOT = 151645;
const IM_START = 151644;
const NL = 198;
const ASSISTANT = [IM_START, 77091, NL];
const SYSTEM_TOKENS = 2000;
const ANSWER_TOKENS = 180;
const TOOL_TOKENS = 420;

/** Deterministic pseudo-random ordinary token ids. */
function rng(seed: number) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % 150_000;
  };
}

export function benchSession(turns: number): CompletionSession {
  const next = rng(turns);
  const ids = (n: number) => Array.from({ length: n }, next);
  let prompt = [IM_START, 8948, NL, ...ids(SYSTEM_TOKENS), EOT, NL, IM_START, 872, NL, ...ids(60), EOT, NL, ...ASSISTANT];
  const messages: Record<string, unknown>[] = [
    { role: "system", content: "s" },
    { role: "user", content: "u" },
  ];
  const completions: CompletionRecord[] = [];
  for (let t = 0; t < turns; t++) {
    const sampled = [...ids(ANSWER_TOKENS - 1), EOT];
    const message = { role: "assistant", content: "", tool_calls: [{ id: `c${t}`, type: "function", function: { name: "bash", arguments: "{}" } }] };
    completions.push({
      completion_id: `msg_${t.toString(16).padStart(12, "0")}`,
      seq: t,
      request: { model: "m", messages: [...messages] },
      original_request: {},
      response: {
        prompt_token_ids: prompt,
        choices: [
          {
            index: 0,
            message,
            finish_reason: t === turns - 1 ? "stop" : "tool_calls",
            token_ids: sampled,
            logprobs: { content: sampled.map((id, i) => ({ token: "x", token_id: id, logprob: -((i % 50) + 1) / 64 })) },
          },
        ],
      },
      metadata: { session_id: "bench" },
    });
    // The next prompt echoes the answer canonically (here: identically), then the tool result and a new generation prompt.
    prompt = [...prompt, ...sampled.slice(0, -1), EOT, NL, IM_START, 872, NL, ...ids(TOOL_TOKENS), EOT, NL, ...ASSISTANT];
    messages.push(message, { role: "tool", tool_call_id: `c${t}`, content: "r" });
  }
  return { session_id: "bench", completion_count: turns, task_id: "t", metadata: {}, completions };
}

function time(fn: () => unknown, iterations: number): { median: number; p99: number; min: number } {
  for (let i = 0; i < Math.min(3, iterations); i++) fn();
  gc();
  const ms: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    fn();
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return { median: ms[ms.length >> 1], p99: ms[Math.min(ms.length - 1, Math.floor(ms.length * 0.99))], min: ms[0] };
}

export async function run(): Promise<void> {
  const config = PrefixMergingConfig.parse({ end_of_turn_token_id: EOT });
  const rows: Record<string, string | number>[] = [];
  let base: { tokens: number; ms: number } | undefined;
  for (const [turns, iterations] of [
    [51, 60],
    [102, 30],
    [204, 12],
  ] as const) {
    const s = benchSession(turns);
    const last = s.completions[s.completions.length - 1].response.prompt_token_ids as number[];
    const tokens = s.completions.reduce(
      (n, c) => n + (c.response.prompt_token_ids as number[]).length + ((c.response.choices as any)[0].token_ids as number[]).length,
      0,
    );
    const built = buildPrefixMerging(s, config);
    if (built.traces.length !== 1) throw new Error(`bench session merged into ${built.traces.length} traces`);
    const pm = time(() => buildPrefixMerging(s, config), iterations);
    const pr = time(() => buildPerRequest(s), iterations);
    const vf = time(() => verifyTrajectory(built, s), iterations);
    base ??= { tokens, ms: pm.median };
    rows.push({
      turns,
      final_prompt_tokens: last.length,
      total_tokens: tokens,
      "prefix_merging median ms": +pm.median.toFixed(2),
      "p99 ms": +pm.p99.toFixed(2),
      "min ms": +pm.min.toFixed(2),
      "ns/token": +((pm.median * 1e6) / tokens).toFixed(2),
      "time ratio": +(pm.median / base.ms).toFixed(2),
      "token ratio": +(tokens / base.tokens).toFixed(2),
      "per_request median ms": +pr.median.toFixed(2),
      "verify median ms": +vf.median.toFixed(2),
    });
  }
  console.log("builder: prefix_merging on one agent session (goal: <= 20 ms at 51 turns, time ratio ~ token ratio)");
  console.table(rows);
}
