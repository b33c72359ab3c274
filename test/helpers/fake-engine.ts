/**
 * A small engine-shaped upstream for tests and benchmarks: answers
 * `POST /v1/chat/completions` non-streaming like vLLM (top-level
 * `prompt_token_ids`, per-choice `token_ids`, `logprobs.content`,
 * `message.reasoning`) or like SGLang (per-choice `prompt_token_ids` and
 * `meta_info.output_token_logprobs` triples, `message.reasoning_content`).
 * Token ids and logprobs are deterministic functions of the text, so a test
 * can compare what it stored with what the engine sent.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { Json } from "../../src/proxy/chat-types.ts";
import type { UpstreamFlavor } from "../../src/proxy/types.ts";

export interface EngineTurn {
  content?: string | null;
  reasoning?: string;
  toolCalls?: { name: string; arguments: string; id?: string }[];
  finish?: string;
  /** vLLM's `stop_reason` (the stop string that matched). */
  stopReason?: string | number | null;
}

export interface EngineError {
  status: number;
  body: unknown;
}

export interface FakeEngineOptions {
  flavor: UpstreamFlavor;
  /** The answer to one request; defaults to a short text answer. */
  reply?: (body: Json) => EngineTurn | EngineError;
  /** Serve on this port (0 = any). */
  port?: number;
  /** Keep at most this many received bodies (default 64). */
  keep?: number;
  /** Answer generations after this many milliseconds. */
  delayMs?: number;
}

export interface FakeEngine {
  url: string;
  /** The most recent request bodies, oldest first. */
  readonly requests: Json[];
  /** Every answer sent, oldest first (bounded like `requests`). */
  readonly answers: Json[];
  stop(): Promise<void>;
}

export async function startFakeEngine(opts: FakeEngineOptions): Promise<FakeEngine> {
  const keep = opts.keep ?? 64;
  const requests: Json[] = [];
  const answers: Json[] = [];
  let n = 0;
  const server: Server = createServer((req, res) => {
    void readJson(req).then((body) => {
      if (req.url?.endsWith("/tokenize")) return send(res, 200, tokenizeAnswer(body));
      if (!req.url?.endsWith("/v1/chat/completions")) return send(res, 404, { error: { message: "not found" } });
      push(requests, body, keep);
      const turn = (opts.reply ?? defaultReply)(body);
      if ("status" in turn) return send(res, turn.status, turn.body);
      const answer = opts.flavor === "vllm" ? vllmAnswer(body, turn, n++) : sglangAnswer(body, turn, n++);
      push(answers, answer, keep);
      if (opts.delayMs) setTimeout(() => send(res, 200, answer), opts.delayMs).unref();
      else send(res, 200, answer);
    }, () => send(res, 400, { error: { message: "bad json" } }));
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen({ host: "127.0.0.1", port: opts.port ?? 0 }, r));
  const addr = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    requests,
    answers,
    stop: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

function push(list: Json[], v: Json, keep: number): void {
  list.push(v);
  if (list.length > keep) list.shift();
}

function defaultReply(): EngineTurn {
  return { content: "Hello from the engine." };
}

function readJson(req: IncomingMessage): Promise<Json> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")) as Json);
      } catch (err) {
        reject(err as Error);
      }
    });
    req.on("error", reject);
  });
}

function send(res: import("node:http").ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** Deterministic ids of a text: one per 4 characters (about a real tokenizer's rate), never 0. */
export function fakeIds(text: string, salt = 0): number[] {
  const out: number[] = [];
  for (let i = 0; i < text.length; i += 4) {
    let h = salt + 17;
    for (let k = i; k < Math.min(text.length, i + 4); k++) h = (h * 31 + text.charCodeAt(k)) % 150_000;
    out.push(h + 1);
  }
  return out;
}

function promptIds(body: Json): number[] {
  return fakeIds(JSON.stringify(body.messages ?? []) + JSON.stringify(body.tools ?? []), 7);
}

function sampledText(turn: EngineTurn): string {
  let s = turn.reasoning ? `<think>\n${turn.reasoning}\n</think>\n\n` : "";
  s += turn.content ?? "";
  for (const tc of turn.toolCalls ?? []) s += `<tool_call>\n{"name": "${tc.name}", "arguments": ${tc.arguments}}\n</tool_call>`;
  return s;
}

function sampled(turn: EngineTurn, n: number): { ids: number[]; logprobs: number[] } {
  const ids = [...fakeIds(sampledText(turn), n), 151645];
  return { ids, logprobs: ids.map((id, i) => -((id % 997) / 1000) - i * 1e-4) };
}

function message(turn: EngineTurn, n: number, reasoningKey: string): Json {
  const m: Json = { role: "assistant", content: turn.content ?? null };
  if (turn.reasoning !== undefined) m[reasoningKey] = turn.reasoning;
  if (turn.toolCalls?.length) {
    m.tool_calls = turn.toolCalls.map((tc, i) => ({ id: tc.id ?? `chatcmpl-tool-${n}${i}`, type: "function", function: { name: tc.name, arguments: tc.arguments } }));
  }
  return m;
}

function finishOf(turn: EngineTurn): string {
  return turn.finish ?? (turn.toolCalls?.length ? "tool_calls" : "stop");
}

function vllmAnswer(body: Json, turn: EngineTurn, n: number): Json {
  const prompt = promptIds(body);
  const { ids, logprobs } = sampled(turn, n);
  return {
    id: `chatcmpl-${n}`, object: "chat.completion", created: 1_750_000_000 + n, model: body.model,
    choices: [{
      index: 0, message: message(turn, n, "reasoning"),
      logprobs: { content: ids.map((id, i) => ({ token: `t${id}`, logprob: logprobs[i], bytes: null, top_logprobs: [] })) },
      finish_reason: finishOf(turn), stop_reason: turn.stopReason ?? null, token_ids: ids,
    }],
    usage: { prompt_tokens: prompt.length, completion_tokens: ids.length, total_tokens: prompt.length + ids.length },
    prompt_logprobs: null, prompt_token_ids: prompt, kv_transfer_params: null,
  };
}

function sglangAnswer(body: Json, turn: EngineTurn, n: number): Json {
  const prompt = promptIds(body);
  const { ids, logprobs } = sampled(turn, n);
  return {
    id: `sg-${n}`, object: "chat.completion", created: 1_750_000_000 + n, model: body.model,
    choices: [{
      index: 0, message: message(turn, n, "reasoning_content"),
      logprobs: { content: ids.map((id, i) => ({ token: `t${id}`, logprob: logprobs[i], top_logprobs: [] })) },
      finish_reason: finishOf(turn), matched_stop: turn.stopReason ?? 151645,
      prompt_token_ids: prompt,
      meta_info: {
        id: `sg-${n}`, prompt_tokens: prompt.length, completion_tokens: ids.length, cached_tokens: 0,
        e2e_latency: 0.0123, queue_time: 0.0004,
        output_token_logprobs: ids.map((id, i) => [logprobs[i], id, null]),
      },
    }],
    usage: { prompt_tokens: prompt.length, completion_tokens: ids.length, total_tokens: prompt.length + ids.length },
  };
}

function tokenizeAnswer(body: Json): Json {
  const ids = promptIds(body);
  return { count: ids.length, max_model_len: 32768, tokens: ids };
}
