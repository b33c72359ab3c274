/**
 * OpenAI Chat Completions: the pivot format itself, so the request passes
 * through (normalized) and the answer is the upstream's with the engine-only
 * fields removed and the client's model name restored.
 */
import type { ChatChoice, ChatMessage, ChatRequest, ChatResponse, Json } from "../chat-types.ts";
import type { CallContext, Dialect } from "../dialect.ts";
import { normalizeChat } from "../normalize.ts";
import { ShapeCheck } from "../validate.ts";
import { openaiErrorReply } from "./openai-error.ts";
import { chatStream } from "./openai-chat-stream.ts";

const ROLES = new Set(["system", "developer", "user", "assistant", "tool", "function"]);

export const openaiChat: Dialect = {
  apiType: "openai_chat",
  modelOf: (body) => (typeof body.model === "string" ? body.model : "unknown"),
  wantsStream: (body) => body.stream === true,
  toChat,
  fromChat,
  toStream: chatStream,
  errorReply: openaiErrorReply,
};

function toChat(body: Json, ctx: CallContext): ChatRequest {
  checkChatBody(body);
  const req = { ...body, model: ctx.modelServed } as ChatRequest;
  req.messages = req.messages.map(reasoningField);
  return normalizeChat(req);
}

/** History may carry reasoning as vLLM's `reasoning`; the pivot spells it `reasoning_content`. */
function reasoningField(m: ChatMessage): ChatMessage {
  if (typeof m.reasoning !== "string" || m.reasoning_content !== undefined) return m;
  const { reasoning, ...rest } = m;
  return { ...rest, reasoning_content: reasoning };
}

export function checkChatBody(body: Json): void {
  const c = new ShapeCheck("chat completion request");
  c.optString(body.model, "model");
  if (c.array(body.messages, "messages", true)) {
    body.messages.forEach((m, i) => {
      if (!c.object(m, `messages.${i}`)) return;
      if (typeof m.role !== "string" || !ROLES.has(m.role)) c.fail(`messages.${i}.role`, "must be one of " + [...ROLES].join(", "));
    });
  }
  if (body.tools !== undefined && body.tools !== null) c.array(body.tools, "tools");
  c.optNumber(body.max_tokens, "max_tokens");
  c.optNumber(body.max_completion_tokens, "max_completion_tokens");
  c.optNumber(body.temperature, "temperature");
  c.done();
}

/** The client-facing message of a choice: no engine extras, reasoning as `reasoning_content`. */
export function clientMessage(choice: ChatChoice): Json {
  const m = choice.message;
  const out: Json = { role: "assistant", content: m.content ?? null };
  if (m.reasoning_content) out.reasoning_content = m.reasoning_content;
  if (m.tool_calls?.length) out.tool_calls = m.tool_calls;
  out.refusal = m.refusal ?? null;
  return out;
}

function fromChat(resp: ChatResponse, body: Json): Json {
  const wantLogprobs = body.logprobs === true;
  return {
    id: resp.id,
    object: "chat.completion",
    created: resp.created,
    model: typeof body.model === "string" ? body.model : resp.model,
    choices: resp.choices.map((ch) => ({
      index: ch.index,
      message: clientMessage(ch),
      logprobs: wantLogprobs ? (ch.logprobs ?? null) : null,
      finish_reason: ch.finish_reason ?? "stop",
    })),
    usage: resp.usage ?? null,
    system_fingerprint: resp.system_fingerprint ?? null,
  };
}
