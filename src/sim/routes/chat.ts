/**
 * POST /v1/chat/completions, answered like vLLM (with its `return_token_ids`,
 * `logprobs`/`top_logprobs` fields, reasoning and hermes tool calls) and,
 * for SGLang's chat flags, with per-choice `prompt_token_ids` and `meta_info`.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import type { SimEngine } from "../engine.ts";
import { sendJson, startSse } from "../http.ts";
import type { LogprobEntry } from "../logprobs.ts";
import { DeltaTracker, type Delta } from "../stream-deltas.ts";
import { prepareChat, type ChatChoice, type PreparedChat } from "./chat-prepare.ts";

export async function handleChat(engine: SimEngine, http: IncomingMessage, res: ServerResponse, body: unknown, signal: AbortSignal) {
  // The version of the weights that sample this answer (read before sampling, stamped after generating).
  const version = engine.policyVersion;
  const chat = prepareChat(engine, http, body);
  const meta = { id: `chatcmpl-${randomUUID().replace(/-/g, "")}`, created: Math.floor(Date.now() / 1000), model: chat.req.model ?? engine.opts.modelName };
  if (chat.req.stream) return streamChat(engine, res, chat, meta, signal, version);
  const started = performance.now();
  await Promise.all(chat.choices.map((c) => engine.run(c.gen, signal, () => {}, chat.promptIds.length)));
  sendJson(res, 200, chatResponse(engine, chat, meta, version, (performance.now() - started) / 1000), { "x-policy-version": version });
}

interface Meta {
  id: string;
  created: number;
  model: string;
}

function chatResponse(engine: SimEngine, chat: PreparedChat, meta: Meta, version: string, latency: number) {
  const { req, promptIds } = chat;
  const completion = chat.choices.reduce((a, c) => a + c.gen.ids.length, 0);
  return {
    id: meta.id,
    object: "chat.completion",
    created: meta.created,
    model: meta.model,
    choices: chat.choices.map((c) => choiceBody(engine, chat, c, meta, version, latency)),
    service_tier: null,
    system_fingerprint: null,
    usage: { prompt_tokens: promptIds.length, total_tokens: promptIds.length + completion, completion_tokens: completion, prompt_tokens_details: null },
    prompt_logprobs: null,
    prompt_token_ids: req.return_token_ids ? promptIds : null,
    kv_transfer_params: null,
    policy_version: version,
  };
}

function choiceBody(engine: SimEngine, chat: PreparedChat, c: ChatChoice, meta: Meta, version: string, latency: number) {
  const { req } = chat;
  const reasoning = req.include_reasoning === false ? null : c.parsed.reasoning;
  const body: Record<string, unknown> = {
    index: c.index,
    message: {
      role: "assistant",
      content: c.parsed.content,
      refusal: null,
      annotations: null,
      audio: null,
      function_call: null,
      tool_calls: c.parsed.toolCalls.map((t, k) => ({ id: c.toolIds[k], type: "function", function: { name: t.name, arguments: t.arguments } })),
      reasoning,
      reasoning_content: reasoning,
    },
    logprobs: req.logprobs ? { content: logprobEntries(engine, chat, c, 0, c.gen.ids.length) } : null,
    finish_reason: c.finishReason,
    stop_reason: c.gen.stopReason,
    token_ids: req.return_token_ids ? c.gen.ids : null,
  };
  if (req.return_prompt_token_ids) body.prompt_token_ids = chat.promptIds;
  if (req.return_meta_info) body.meta_info = sglangMeta(engine, chat, c, meta, version, latency);
  if (chat.sglang) body.matched_stop = c.gen.finish === "stop" ? (c.gen.stopReason ?? engine.tok.eotTokenId) : null;
  return body;
}

function sglangMeta(engine: SimEngine, chat: PreparedChat, c: ChatChoice, meta: Meta, version: string, latency: number) {
  const finish = c.gen.finish === "length" ? { type: "length", length: c.gen.ids.length } : { type: "stop", matched: c.gen.stopReason ?? engine.tok.eotTokenId };
  return {
    id: meta.id,
    finish_reason: finish,
    prompt_tokens: chat.promptIds.length,
    completion_tokens: c.gen.ids.length,
    cached_tokens: 0,
    weight_version: version,
    e2e_latency: latency,
    output_token_logprobs: chat.req.logprobs ? c.gen.ids.map((id, i) => [c.gen.logprobs[i], id, engine.tok.tokenText(id)]) : undefined,
  };
}

function logprobEntries(engine: SimEngine, chat: PreparedChat, c: ChatChoice, from: number, to: number): LogprobEntry[] {
  const top = chat.req.top_logprobs ?? 0;
  const asIds = Boolean(chat.req.return_tokens_as_token_ids);
  const out: LogprobEntry[] = [];
  for (let i = from; i < to; i++) out.push(engine.logprobs.entry(c.gen.ids[i], c.gen.logprobs[i], top, asIds, i));
  return out;
}

async function streamChat(engine: SimEngine, res: ServerResponse, chat: PreparedChat, meta: Meta, signal: AbortSignal, version: string) {
  const { req } = chat;
  const sse = startSse(res, { "x-policy-version": version });
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    sse.write({ id: meta.id, object: "chat.completion.chunk", created: meta.created, model: meta.model, choices, ...extra, policy_version: version });
  for (const c of chat.choices) {
    const first = { index: c.index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null };
    chunk([first], req.return_token_ids ? { prompt_token_ids: chat.promptIds } : {});
  }
  await Promise.all(
    chat.choices.map((c) => {
      const tracker = new DeltaTracker(engine.tok, c.gen, c.parsed, c.toolIds, c.toolMode === "auto" || c.toolMode === "none" ? "tags" : "json");
      return engine.run(c.gen, signal, (i) => {
        const last = i === c.gen.ids.length - 1;
        const choice: Record<string, unknown> = {
          index: c.index,
          delta: deltaBody(tracker.next(i, c.gen.ids[i], last), req.include_reasoning !== false),
          logprobs: req.logprobs ? { content: logprobEntries(engine, chat, c, i, i + 1) } : null,
          finish_reason: last ? c.finishReason : null,
        };
        if (last) choice.stop_reason = c.gen.stopReason;
        if (req.return_token_ids) choice.token_ids = [c.gen.ids[i]];
        chunk([choice]);
      }, chat.promptIds.length);
    }),
  );
  if (req.stream_options?.include_usage) {
    const completion = chat.choices.reduce((a, c) => a + c.gen.ids.length, 0);
    const p = chat.promptIds.length;
    chunk([], { usage: { prompt_tokens: p, total_tokens: p + completion, completion_tokens: completion } });
  }
  sse.end();
}

function deltaBody(d: Delta, includeReasoning: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (d.reasoning !== undefined && includeReasoning) {
    out.reasoning = d.reasoning;
    out.reasoning_content = d.reasoning;
  }
  if (d.content !== undefined) out.content = d.content;
  if (d.toolCalls) out.tool_calls = d.toolCalls;
  return out;
}
