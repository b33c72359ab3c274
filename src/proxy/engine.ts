/**
 * Engine flavors. Before the upstream call the converted request gets the
 * token-capture flags of its engine and is forced non-streaming; the answer is
 * normalized to one shape whatever the engine: top-level `prompt_token_ids`,
 * `choices[i].token_ids`, `choices[i].logprobs.content[]` with `token_id`
 * stamped when aligned, `message.reasoning_content`, and no `meta_info`.
 */
import type { ChatChoice, ChatLogprob, ChatMessage, ChatRequest, ChatResponse, Json } from "./chat-types.ts";
import { isObject } from "./chat-types.ts";
import type { UpstreamFlavor } from "./types.ts";

/** The body actually sent upstream: a copy, the pivot request left as it was. */
export function withEngineFlags(req: ChatRequest, flavor: UpstreamFlavor): Json {
  const out: Json = { ...req, stream: false, logprobs: true };
  delete out.stream_options;
  if (flavor === "vllm") {
    out.return_token_ids = true;
    out.top_logprobs ??= 0;
    out.messages = req.messages.map(renameReasoning);
  } else {
    // return_token_ids: per-choice raw ids on SGLang builds that have it; older builds ignore it.
    out.return_prompt_token_ids = true;
    out.return_meta_info = true;
    out.return_token_ids = true;
  }
  return out;
}

/** vLLM reads an assistant turn's reasoning from `reasoning`. */
export function renameReasoning(m: ChatMessage): ChatMessage {
  if (m.reasoning_content === undefined) return m;
  const { reasoning_content, ...rest } = m;
  return { ...rest, reasoning: reasoning_content };
}

/**
 * The engine's own weight version, read before normalizing (which drops
 * SGLang's meta_info): SGLang RL builds put `weight_version` in each choice's
 * `meta_info`; servers that stamp the whole answer (the sim, some gateways)
 * use a top-level `weight_version` or `policy_version`. Null when none.
 */
export function engineWeightVersion(raw: Json): string | null {
  const top = raw.weight_version ?? raw.policy_version;
  if (typeof top === "string" || typeof top === "number") return String(top);
  const choices = Array.isArray(raw.choices) ? raw.choices : [];
  for (const ch of choices) {
    const meta = isObject(ch) && isObject(ch.meta_info) ? ch.meta_info : undefined;
    const v = meta?.weight_version;
    if (typeof v === "string" || typeof v === "number") return String(v);
  }
  return null;
}

export interface Normalized {
  response: ChatResponse;
  /** Engine-reported timings in ms (SGLang meta_info), empty for vLLM. */
  timings: Record<string, number>;
}

export function normalizeResponse(raw: Json, flavor: UpstreamFlavor): Normalized {
  const resp = raw as unknown as ChatResponse;
  if (!Array.isArray(resp.choices)) resp.choices = [];
  const timings: Record<string, number> = {};
  for (const ch of resp.choices) {
    normalizeMessage(ch);
    if (flavor === "sglang") normalizeSglangChoice(resp, ch, timings);
    stampTokenIds(ch);
  }
  return { response: resp, timings };
}

function normalizeMessage(ch: ChatChoice): void {
  const m = (ch.message ??= { role: "assistant", content: null });
  if (m.reasoning_content == null && typeof m.reasoning === "string") m.reasoning_content = m.reasoning;
  delete m.reasoning;
}

function stampTokenIds(ch: ChatChoice): void {
  const ids = ch.token_ids;
  const content = ch.logprobs?.content;
  if (!Array.isArray(ids) || !Array.isArray(content) || ids.length !== content.length) return;
  for (let i = 0; i < ids.length; i++) content[i].token_id = ids[i];
}

type MetaLogprob = [number, number, string | null] | { token_id?: number; logprob?: number; token_logprob?: number; token?: string };

function normalizeSglangChoice(resp: ChatResponse, ch: ChatChoice, timings: Record<string, number>): void {
  if (Array.isArray(ch.prompt_token_ids)) {
    resp.prompt_token_ids ??= ch.prompt_token_ids as number[];
    delete ch.prompt_token_ids;
  }
  const meta = isObject(ch.meta_info) ? ch.meta_info : undefined;
  delete ch.meta_info;
  if (!meta) return;
  Object.assign(timings, sglangTimings(meta));
  const items = meta.output_token_logprobs;
  if (!Array.isArray(items)) return;
  const entries: ChatLogprob[] = (items as MetaLogprob[]).map(metaEntry);
  ch.token_ids = entries.map((e) => e.token_id as number);
  const existing = ch.logprobs?.content;
  if (Array.isArray(existing) && existing.length === entries.length) {
    existing.forEach((e, i) => Object.assign(e, { token_id: entries[i].token_id, logprob: entries[i].logprob }));
  } else {
    ch.logprobs = { content: entries };
  }
}

function metaEntry(item: MetaLogprob): ChatLogprob {
  if (Array.isArray(item)) {
    const e: ChatLogprob = { token_id: item[1], logprob: item[0] };
    if (typeof item[2] === "string") e.token = item[2];
    return e;
  }
  const e: ChatLogprob = { token_id: item.token_id, logprob: item.logprob ?? item.token_logprob ?? 0 };
  if (typeof item.token === "string") e.token = item.token;
  return e;
}

const SGLANG_SECONDS: Record<string, string> = {
  e2e_latency: "e2e_ms",
  queue_time: "queue_ms",
  prefill_launch_latency: "prefill_launch_ms",
  forward_entry_time: "forward_entry_ms",
};

function sglangTimings(meta: Json): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, name] of Object.entries(SGLANG_SECONDS)) {
    const v = meta[k];
    if (typeof v === "number" && Number.isFinite(v)) out[name] = v * 1000;
  }
  return out;
}
