/** OpenAI chat answer to an Anthropic Message, and Anthropic's error body. */
import type { PolarError } from "../../protocol/errors.ts";
import type { ChatChoice, ChatResponse, Json } from "../chat-types.ts";
import type { ErrorReply } from "../dialect.ts";
import { contextNumbers, errorStatus } from "../errors.ts";
import { anthropicStopReason } from "../finish-reasons.ts";
import { hexId, parseArguments, reasoningSignature, splitCached } from "../ids.ts";

/** The content blocks of an answer, in Anthropic order: thinking, text, tool_use. */
export function anthropicBlocks(ch: ChatChoice | undefined): Json[] {
  const m = ch?.message;
  const blocks: Json[] = [];
  if (m?.reasoning_content) blocks.push({ type: "thinking", thinking: m.reasoning_content, signature: reasoningSignature(m.reasoning_content) });
  if (m?.content) blocks.push({ type: "text", text: m.content });
  for (const tc of m?.tool_calls ?? []) {
    const id = tc.id?.startsWith("toolu_") ? tc.id : hexId("toolu_");
    blocks.push({ type: "tool_use", id, name: tc.function.name, input: parseArguments(tc.function.arguments) });
  }
  if (!blocks.length) blocks.push({ type: "text", text: "" });
  return blocks;
}

export function anthropicUsage(resp: ChatResponse): Json {
  const { fresh, cached } = splitCached(resp.usage as Json | undefined);
  return {
    input_tokens: fresh,
    output_tokens: resp.usage?.completion_tokens ?? 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
  };
}

export function anthropicStop(resp: ChatResponse, body: Json): { stop_reason: string; stop_sequence: string | null } {
  const ch = resp.choices[0];
  const stops = Array.isArray(body.stop_sequences) ? (body.stop_sequences as string[]) : [];
  return anthropicStopReason(ch?.finish_reason, ch?.stop_reason, stops);
}

export function messageId(resp: ChatResponse): string {
  return "msg_" + String(resp.id ?? hexId("", 24)).replace(/[^A-Za-z0-9_-]/g, "").replace(/^chatcmpl-?/, "");
}

export function anthropicFromChat(resp: ChatResponse, body: Json, modelRequested: string): Json {
  return {
    id: messageId(resp),
    type: "message",
    role: "assistant",
    model: modelRequested,
    content: anthropicBlocks(resp.choices[0]),
    ...anthropicStop(resp, body),
    usage: anthropicUsage(resp),
  };
}

const TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  415: "invalid_request_error",
  429: "rate_limit_error",
  503: "overloaded_error",
  504: "timeout_error",
};

export function anthropicErrorReply(err: PolarError): ErrorReply {
  const status = errorStatus(err);
  const type = TYPES[status] ?? (status >= 500 ? "api_error" : "invalid_request_error");
  return { status, body: { type: "error", error: { type, message: anthropicMessage(err) } } };
}

/** Claude Code recognises an overflow by "prompt is too long: N tokens > M maximum". */
function anthropicMessage(err: PolarError): string {
  if (err.code !== "context_length") return err.message;
  const { requested, limit } = contextNumbers(err.message);
  if (requested && limit) return `prompt is too long: ${requested} tokens > ${limit} maximum`;
  return `prompt is too long: ${err.message}`;
}
