/**
 * Multi-turn agent sessions rendered with the real Qwen3 chat template and
 * tokenizer, for the property tests: tool calls and results, <think> reasoning
 * (which the template strips from earlier turns once a new user query
 * arrives), interleaved sub-agents, history compaction, identical retries,
 * length stops, empty answers, unaligned logprobs, and sampled ids that are a
 * non-canonical tokenization of the answer text (BPE drift).
 */
import fc from "fast-check";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";
import type { CompletionRecord, CompletionSession } from "../src/protocol/schemas.ts";
import { record, session } from "./builder-fixtures.ts";

export interface StepSpec {
  kind: "tool" | "text" | "empty" | "empty_ids";
  think: boolean;
  length: boolean;
  retry: boolean;
  compact: boolean;
  unaligned: boolean;
  drift: boolean;
  words: number;
  seed: number;
}
export interface SessionSpec {
  convs: StepSpec[][];
  schedule: number[];
}

const step = (o: { think: fc.Arbitrary<boolean>; kind: fc.Arbitrary<StepSpec["kind"]>; messy: boolean }) =>
  fc.record({
    kind: o.kind,
    think: o.think,
    length: fc.integer({ min: 0, max: 4 }).map((n) => n === 0),
    retry: fc.integer({ min: 0, max: 5 }).map((n) => n === 0),
    compact: o.messy ? fc.integer({ min: 0, max: 6 }).map((n) => n === 0) : fc.constant(false),
    unaligned: o.messy ? fc.integer({ min: 0, max: 6 }).map((n) => n === 0) : fc.constant(false),
    drift: fc.boolean(),
    words: fc.integer({ min: 1, max: 30 }),
    seed: fc.integer({ min: 0, max: 1_000_000 }),
  });

const KINDS = fc.constantFrom<StepSpec["kind"]>("tool", "tool", "text", "empty", "empty_ids");

/** Any session: 1–3 conversations of 1–6 steps, everything mixed. */
export const anySession: fc.Arbitrary<SessionSpec> = fc.record({
  convs: fc.array(fc.array(step({ think: fc.boolean(), kind: KINDS, messy: true }), { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 3 }),
  schedule: fc.array(fc.nat(10), { minLength: 20, maxLength: 20 }),
});

/**
 * Append-only sessions: every prompt of a conversation extends the previous
 * one. A conversation either thinks and stays in one tool loop (no new user
 * query, so no reasoning is stripped), or never thinks.
 */
export const appendOnlySession: fc.Arbitrary<SessionSpec> = fc.record({
  convs: fc.array(
    fc.boolean().chain((thinking) =>
      fc
        .array(step({ think: fc.constant(thinking), kind: thinking ? fc.constant("tool" as const) : KINDS, messy: false }), { minLength: 1, maxLength: 6 })
        .map((steps) => (thinking ? steps.map((s) => ({ ...s, length: false })) : steps)),
    ),
    { minLength: 1, maxLength: 3 },
  ),
  schedule: fc.array(fc.nat(10), { minLength: 20, maxLength: 20 }),
});

const VOCAB = ["the", "file", "src/app.py", "returns", "None", "fix", "test", "passes", "ok", "bug", "line", "42", "import", "def", "x = 1", "(done)"];
const TOOLS = [{ type: "function", function: { name: "bash", description: "Run a shell command", parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] } } }];

function words(n: number, seed: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(VOCAB[(seed + i * 7 + ((seed >> 3) % 5) * i) % VOCAB.length]);
  return out.join(" ");
}

/** Per completion: which conversation and step it answers, and whether a retry superseded it. */
export interface Origin {
  conv: number;
  step: number;
  superseded: boolean;
}

export interface Generated {
  session: CompletionSession;
  origins: Map<string, Origin>;
  conversations: number;
}

type Msg = Record<string, unknown>;

class Conversation {
  messages: Msg[];
  step = 0;
  constructor(
    readonly index: number,
    readonly steps: StepSpec[],
  ) {
    this.messages = [this.system(), { role: "user", content: `Task ${index}: ${words(6, index * 13)}` }];
  }
  system(): Msg {
    return { role: "system", content: `You are agent ${this.index}. Use tools.` };
  }
  get done() {
    return this.step >= this.steps.length;
  }
}

export function generate(spec: SessionSpec): Generated {
  const tok = qwen3Tokenizer();
  const convs = spec.convs.map((steps, i) => new Conversation(i, steps));
  const records: CompletionRecord[] = [];
  const origins = new Map<string, Origin>();
  let k = 0;
  const live = () => convs.filter((c) => !c.done);
  while (live().length) {
    const l = live();
    const c = l[spec.schedule[k % spec.schedule.length] % l.length];
    k++;
    const s = c.steps[c.step];
    if (s.compact) c.messages = [c.system(), { role: "user", content: `Summary of steps 0-${c.step}: ${words(5, s.seed)}. Continue.` }];
    const prompt = tok.tokenizeChat(c.messages, { tools: TOOLS });
    const push = (answer: Answer, superseded: boolean) => {
      const id = `c${c.index}s${c.step}${superseded ? "r" : ""}-${records.length}`;
      const r = record({
        id,
        seq: records.length,
        prompt,
        sampled: answer.ids,
        finish: answer.finish,
        messages: structuredClone(c.messages),
        message: answer.message,
        tools: TOOLS,
        metadata: { conv: c.index, step: c.step },
      });
      if (s.unaligned && !superseded && answer.ids && answer.ids.length) (r.response as any).choices[0].logprobs.content[0].token_id = -1;
      records.push(r);
      origins.set(id, { conv: c.index, step: c.step, superseded });
    };
    if (s.retry) push(answerOf({ ...s, kind: "text", think: false, length: false, seed: s.seed + 1 }, c.step), true);
    const a = answerOf(s, c.step);
    push(a, false);
    c.messages.push(a.message);
    if (a.toolCallId) c.messages.push({ role: "tool", tool_call_id: a.toolCallId, content: `out ${words(s.words % 9, s.seed + 5)}\nexit 0` });
    else c.messages.push({ role: "user", content: `Next: ${words(4, s.seed + 9)}` });
    c.step++;
  }
  return { session: session(records), origins, conversations: convs.length };
}

interface Answer {
  ids: number[] | null;
  finish: string;
  message: Msg;
  toolCallId?: string;
}

function answerOf(s: StepSpec, stepIndex: number): Answer {
  const tok = qwen3Tokenizer();
  if (s.kind === "empty_ids") return { ids: [], finish: "stop", message: { role: "assistant", content: "" } };
  const reasoning = s.think ? `Let me think: ${words(s.words, s.seed + 3)}` : null;
  const content = s.kind === "empty" ? "" : s.kind === "tool" ? (s.seed % 2 ? words(3, s.seed) : "") : words(s.words, s.seed);
  const cmd = `grep -n ${words(2, s.seed + 1)} src`;
  const call = s.kind === "tool" ? `<tool_call>\n{"name": "bash", "arguments": {"cmd": ${JSON.stringify(cmd)}}}\n</tool_call>` : "";
  const text = `${reasoning !== null ? `<think>\n${reasoning}\n</think>\n\n` : ""}${content}${content && call ? "\n" : ""}${call}`;
  let ids = s.drift ? encodeInPieces(text, s.seed) : tok.encode(text);
  if (s.length && ids.length >= 2) {
    ids = ids.slice(0, Math.max(1, ids.length >> 1));
    return { ids, finish: "length", message: { role: "assistant", content: tok.decode(ids).replace(/^<think>[\s\S]*?<\/think>\n*/, "") } };
  }
  ids = [...ids, tok.eotTokenId];
  const message: Msg = { role: "assistant", content };
  if (reasoning !== null) message.reasoning_content = reasoning;
  if (call) {
    const id = `call_${stepIndex}_${s.seed}`;
    message.tool_calls = [{ id, type: "function", function: { name: "bash", arguments: JSON.stringify({ cmd }) } }];
    return { ids, finish: "tool_calls", message, toolCallId: id };
  }
  return { ids, finish: "stop", message };
}

/** A valid but non-canonical tokenization: the text cut at a few places, each piece encoded alone. */
function encodeInPieces(text: string, seed: number): number[] {
  const tok = qwen3Tokenizer();
  const out: number[] = [];
  let at = 0;
  const step = 3 + (seed % 11);
  while (at < text.length) {
    let end = Math.min(text.length, at + step);
    // Never cut inside a special token's text.
    const open = text.lastIndexOf("<", end);
    if (open >= at && open < end && text.indexOf(">", open) >= end) end = text.indexOf(">", open) + 1;
    out.push(...tok.encode(text.slice(at, end)));
    at = end;
  }
  return out;
}
