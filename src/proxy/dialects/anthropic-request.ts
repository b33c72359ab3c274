/**
 * Anthropic Messages request to OpenAI chat. System blocks become one system
 * message (Claude Code's per-request `x-anthropic-billing-header` line is
 * stripped: it changes on every call and would break prefix chains), thinking
 * blocks become `reasoning_content`, tool_use blocks become `tool_calls`,
 * tool_result blocks become `tool` messages (their images a following user
 * message), and `thinking` switches `enable_thinking`.
 */
import type { ChatMessage, ChatRequest, ChatToolCall, Json } from "../chat-types.ts";
import { isObject } from "../chat-types.ts";
import type { CallContext } from "../dialect.ts";
import { hexId } from "../ids.ts";
import { normalizeChat } from "../normalize.ts";
import { ShapeCheck } from "../validate.ts";

const BILLING_RE = /^x-anthropic-billing-header:.*$\n?/gm;

export function anthropicToChat(body: Json, ctx: CallContext, forCount = false): ChatRequest {
  check(body, forCount);
  const messages: ChatMessage[] = [];
  const system = systemText(body.system);
  if (system) messages.push({ role: "system", content: system });
  for (const m of body.messages as Json[]) messages.push(...convertMessage(m));
  const req: ChatRequest = { model: ctx.modelServed, messages };
  if (!forCount) {
    req.max_tokens = typeof body.max_tokens === "number" ? body.max_tokens : 4096;
    copy(body, req, ["temperature", "top_p", "top_k", "stream"]);
    if (Array.isArray(body.stop_sequences) && body.stop_sequences.length) req.stop = body.stop_sequences as string[];
    const format = responseFormat(body);
    if (format) req.response_format = format;
  }
  addTools(body, req);
  const thinking = isObject(body.thinking) ? body.thinking.type : undefined;
  if (thinking === "enabled" || thinking === "adaptive") req.chat_template_kwargs = { enable_thinking: true };
  else if (thinking === "disabled") req.chat_template_kwargs = { enable_thinking: false };
  return normalizeChat(req);
}

function check(body: Json, forCount: boolean): void {
  const c = new ShapeCheck(forCount ? "count_tokens request" : "messages request");
  c.optString(body.model, "model");
  if (!forCount) c.optNumber(body.max_tokens, "max_tokens");
  if (body.system !== undefined && typeof body.system !== "string") c.array(body.system, "system");
  if (c.array(body.messages, "messages", true)) {
    body.messages.forEach((m, i) => {
      if (!c.object(m, `messages.${i}`)) return;
      if (m.role !== "user" && m.role !== "assistant" && m.role !== "system") c.fail(`messages.${i}.role`, "must be user, assistant or system");
      if (typeof m.content !== "string") c.array(m.content, `messages.${i}.content`);
    });
  }
  if (body.tools !== undefined) c.array(body.tools, "tools");
  c.done();
}

function copy(from: Json, to: Json, keys: string[]): void {
  for (const k of keys) if (from[k] !== undefined && from[k] !== null) to[k] = from[k];
}

/** The system prompt as text: blocks joined by "\n", billing-header lines removed. */
export function systemText(system: unknown): string {
  const text = typeof system === "string" ? system : Array.isArray(system) ? blockTexts(system as Json[]).join("\n") : "";
  return text.replace(BILLING_RE, "").replace(/^\n+/, "");
}

function blockTexts(blocks: Json[]): string[] {
  const out: string[] = [];
  for (const b of blocks) {
    if (typeof b === "string") out.push(b);
    else if (isObject(b) && typeof b.text === "string" && !b.text.startsWith("x-anthropic-billing-header:")) out.push(b.text);
  }
  return out;
}

function convertMessage(m: Json): ChatMessage[] {
  if (m.role === "system") return [{ role: "system", content: typeof m.content === "string" ? m.content : blockTexts(m.content as Json[]).join("\n") }];
  if (typeof m.content === "string") return [{ role: m.role as "user" | "assistant", content: m.content }];
  const blocks = (m.content as unknown[]).filter(isObject);
  return m.role === "assistant" ? [assistantMessage(blocks)] : userMessages(blocks);
}

function assistantMessage(blocks: Json[]): ChatMessage {
  const texts: string[] = [];
  const thinking: string[] = [];
  const calls: ChatToolCall[] = [];
  for (const b of blocks) {
    if (b.type === "text" && typeof b.text === "string") texts.push(b.text);
    else if (b.type === "thinking" && typeof b.thinking === "string") thinking.push(b.thinking);
    else if (b.type === "tool_use") {
      const id = typeof b.id === "string" ? b.id : hexId("call_");
      calls.push({ id, type: "function", function: { name: String(b.name ?? ""), arguments: JSON.stringify(b.input ?? {}) } });
    }
  }
  const msg: ChatMessage = { role: "assistant", content: texts.length ? texts.join("\n") : calls.length ? null : "" };
  if (thinking.length) msg.reasoning_content = thinking.join("\n");
  if (calls.length) msg.tool_calls = calls;
  return msg;
}

function userMessages(blocks: Json[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  const resultImages: Json[] = [];
  const rest: Json[] = [];
  for (const b of blocks) {
    if (b.type === "tool_result") {
      const { text, images } = toolResultContent(b.content);
      out.push({ role: "tool", tool_call_id: String(b.tool_use_id ?? ""), content: b.is_error === true ? `[Tool Error] ${text}` : text });
      resultImages.push(...images);
    } else {
      const part = userPart(b);
      if (part) rest.push(part);
    }
  }
  if (resultImages.length) out.push({ role: "user", content: resultImages });
  if (rest.length || !out.length) out.push({ role: "user", content: collapse(rest) });
  return out;
}

function toolResultContent(content: unknown): { text: string; images: Json[] } {
  if (typeof content === "string") return { text: content, images: [] };
  const texts: string[] = [];
  const images: Json[] = [];
  for (const b of Array.isArray(content) ? content : []) {
    if (!isObject(b)) continue;
    const part = userPart(b);
    if (part?.type === "image_url") images.push(part);
    else if (part?.type === "text") texts.push(part.text as string);
  }
  return { text: texts.join("\n"), images };
}

/** One Anthropic user block as an OpenAI content part (undefined for blocks with no model-visible content). */
function userPart(b: Json): Json | undefined {
  if (b.type === "text" && typeof b.text === "string") return { type: "text", text: b.text };
  if (b.type === "image" && isObject(b.source)) {
    const s = b.source;
    if (s.type === "base64") return { type: "image_url", image_url: { url: `data:${s.media_type};base64,${s.data}` } };
    if (s.type === "url") return { type: "image_url", image_url: { url: s.url } };
    return undefined;
  }
  if (b.type === "document" && isObject(b.source)) {
    const s = b.source;
    if (s.type === "text" && typeof s.data === "string") return { type: "text", text: s.data };
    if (s.type === "content" && Array.isArray(s.content)) return { type: "text", text: blockTexts(s.content as Json[]).join("\n") };
    return undefined;
  }
  if (b.type === "search_result" && Array.isArray(b.content)) return { type: "text", text: blockTexts(b.content as Json[]).join("\n") };
  return undefined;
}

/** Parts collapse to one string when they are all text (the common case, and what templates expect). */
function collapse(parts: Json[]): string | Json[] {
  if (parts.every((p) => p.type === "text")) return parts.map((p) => p.text as string).join("\n");
  return parts;
}

function addTools(body: Json, req: ChatRequest): void {
  const tools: Json[] = [];
  for (const t of Array.isArray(body.tools) ? (body.tools as unknown[]) : []) {
    if (!isObject(t) || typeof t.name !== "string" || !t.name) continue;
    if (t.type !== undefined && t.type !== "custom" && t.input_schema === undefined) continue; // server tools
    tools.push({ type: "function", function: { name: t.name, description: t.description ?? "", parameters: t.input_schema ?? { type: "object", properties: {} } } });
  }
  if (!tools.length) return;
  req.tools = tools;
  const choice = isObject(body.tool_choice) ? body.tool_choice : { type: "auto" };
  req.tool_choice = choice.type === "any" ? "required" : choice.type === "none" ? "none" : choice.type === "tool" ? { type: "function", function: { name: choice.name } } : "auto";
  if (choice.disable_parallel_tool_use === true) req.parallel_tool_calls = false;
}

/** Structured output (`output_format`, or `output_config.format`) as an OpenAI response_format. */
function responseFormat(body: Json): Json | undefined {
  const f = isObject(body.output_format) ? body.output_format : isObject(body.output_config) && isObject(body.output_config.format) ? body.output_config.format : undefined;
  if (!f || f.type !== "json_schema" || !isObject(f.schema)) return undefined;
  return { type: "json_schema", json_schema: { name: "output", schema: f.schema } };
}
