/**
 * The Chat Completions stream synthesized from one finished answer: a role
 * chunk, reasoning and text split over several deltas, each tool call as a
 * header fragment then argument fragments, a finish chunk with
 * `finish_reason`, the usage chunk when asked for, then `[DONE]`.
 */
import type { ChatChoice, ChatResponse, Json } from "../chat-types.ts";
import { isObject } from "../chat-types.ts";
import { dataEvent, splitDeltas } from "../sse.ts";

export function chatStream(resp: ChatResponse, body: Json): string {
  const includeUsage = isObject(body.stream_options) && body.stream_options.include_usage === true;
  const model = typeof body.model === "string" ? body.model : resp.model;
  const base = { id: resp.id, object: "chat.completion.chunk", created: resp.created, model, system_fingerprint: resp.system_fingerprint ?? null };
  const extra = includeUsage ? { usage: null } : {};
  const chunk = (index: number, delta: Json, finish: string | null = null, logprobs: unknown = null): string =>
    dataEvent({ ...base, choices: [{ index, delta, logprobs, finish_reason: finish }], ...extra });
  let out = "";
  for (const ch of resp.choices) out += choiceChunks(ch, body.logprobs === true, chunk);
  if (includeUsage) out += dataEvent({ ...base, choices: [], usage: resp.usage ?? null });
  return out + "data: [DONE]\n\n";
}

type ChunkFn = (index: number, delta: Json, finish?: string | null, logprobs?: unknown) => string;

function choiceChunks(ch: ChatChoice, wantLogprobs: boolean, chunk: ChunkFn): string {
  const i = ch.index;
  const m = ch.message;
  let out = chunk(i, { role: "assistant", content: "" });
  for (const piece of splitDeltas(m.reasoning_content ?? "")) out += chunk(i, { reasoning_content: piece });
  const text = splitDeltas(m.content ?? "");
  text.forEach((piece, k) => {
    // Logprobs ride once, with the first content delta, when the client asked for them.
    const lp = wantLogprobs && k === 0 ? (ch.logprobs ?? null) : null;
    out += chunk(i, { content: piece }, null, lp);
  });
  (m.tool_calls ?? []).forEach((tc, k) => {
    const head = { index: k, id: tc.id, type: "function", function: { name: tc.function.name, arguments: "" } };
    out += chunk(i, { tool_calls: [head] });
    for (const piece of splitDeltas(tc.function.arguments)) out += chunk(i, { tool_calls: [{ index: k, function: { arguments: piece } }] });
  });
  return out + chunk(i, {}, ch.finish_reason ?? "stop");
}
