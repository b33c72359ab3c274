/** OpenAI chat answer to a Google GenerateContentResponse, and Google's error body. */
import type { PolarError } from "../../protocol/errors.ts";
import type { ChatResponse, Json } from "../chat-types.ts";
import type { ErrorReply } from "../dialect.ts";
import { contextNumbers, errorStatus } from "../errors.ts";
import { finishMapping } from "../finish-reasons.ts";
import { encodeReasoning, parseArguments, reasoningSignature } from "../ids.ts";

/**
 * Parts in Gemini order: the thought summary, the text, then function calls.
 * The first call carries the thoughtSignature: the turn's reasoning, encoded
 * reversibly (`encodeReasoning`), because clients such as Gemini CLI drop
 * thought parts from the history they send back and keep only the signature.
 * The request converter restores `reasoning_content` from it, so the
 * re-rendered turn is the sampled one. Without reasoning it is an opaque hash.
 */
export function googleParts(resp: ChatResponse): { thought?: Json; text?: Json; calls: Json[] } {
  const m = resp.choices[0]?.message;
  const out: { thought?: Json; text?: Json; calls: Json[] } = { calls: [] };
  if (m?.reasoning_content) out.thought = { text: m.reasoning_content, thought: true };
  if (m?.content) out.text = { text: m.content };
  (m?.tool_calls ?? []).forEach((tc, i) => {
    const part: Json = { functionCall: { id: tc.id, name: tc.function.name, args: parseArguments(tc.function.arguments) } };
    if (i === 0) part.thoughtSignature = m?.reasoning_content ? encodeReasoning(m.reasoning_content) : reasoningSignature(tc.function.arguments);
    out.calls.push(part);
  });
  return out;
}

export function googleUsage(resp: ChatResponse): Json {
  const prompt = resp.usage?.prompt_tokens ?? 0;
  const completion = resp.usage?.completion_tokens ?? 0;
  const usage: Json = { promptTokenCount: prompt, candidatesTokenCount: completion, totalTokenCount: prompt + completion };
  const cached = resp.usage?.prompt_tokens_details?.cached_tokens;
  if (cached) usage.cachedContentTokenCount = cached;
  return usage;
}

export function googleFinish(resp: ChatResponse): string {
  return finishMapping(resp.choices[0]?.finish_reason).google;
}

export function googleChunk(resp: ChatResponse, modelRequested: string, parts: Json[], final: boolean): Json {
  const candidate: Json = { content: { role: "model", parts }, index: 0 };
  if (final) candidate.finishReason = googleFinish(resp);
  const chunk: Json = { candidates: [candidate] };
  if (final) chunk.usageMetadata = googleUsage(resp);
  chunk.modelVersion = modelRequested;
  chunk.responseId = resp.id;
  return chunk;
}

export function googleFromChat(resp: ChatResponse, modelRequested: string): Json {
  const p = googleParts(resp);
  const parts = [p.thought, p.text, ...p.calls].filter((x): x is Json => x !== undefined);
  if (!parts.length) parts.push({ text: "" });
  return googleChunk(resp, modelRequested, parts, true);
}

const STATUSES: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  409: "ABORTED",
  413: "INVALID_ARGUMENT",
  415: "INVALID_ARGUMENT",
  429: "RESOURCE_EXHAUSTED",
  499: "CANCELLED",
  500: "INTERNAL",
  502: "UNAVAILABLE",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

export function googleErrorReply(err: PolarError): ErrorReply {
  const code = errorStatus(err);
  const status = STATUSES[code] ?? (code >= 500 ? "INTERNAL" : "INVALID_ARGUMENT");
  return { status: code, body: { error: { code, message: googleMessage(err), status } } };
}

function googleMessage(err: PolarError): string {
  if (err.code !== "context_length") return err.message;
  const { requested, limit } = contextNumbers(err.message);
  if (requested && limit) return `The input token count (${requested}) exceeds the maximum number of tokens allowed (${limit}).`;
  return `The input token count exceeds the maximum number of tokens allowed: ${err.message}`;
}
