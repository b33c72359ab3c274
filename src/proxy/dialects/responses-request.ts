/**
 * OpenAI Responses request to OpenAI chat. `instructions` and system or
 * developer items become the system message; an assistant turn is rebuilt
 * from consecutive reasoning, assistant message and call items (so a turn the
 * model sampled as one stays one); call outputs become `tool` messages.
 * Tools: flat functions, namespace tools (flattened to `<ns>__<name>`),
 * custom (freeform) tools as a function with one string `input`, local shell
 * as a `shell` function; other built-in tools are not offered to the model.
 */
import type { ChatMessage, ChatRequest, ChatToolCall, Json } from "../chat-types.ts";
import { isObject } from "../chat-types.ts";
import type { CallContext } from "../dialect.ts";
import { decodeReasoning } from "../ids.ts";
import { normalizeChat } from "../normalize.ts";
import { ShapeCheck } from "../validate.ts";
import { addResponsesTools } from "./responses-tools.ts";

export function responsesToChat(body: Json, ctx: CallContext): ChatRequest {
  check(body);
  const messages: ChatMessage[] = [];
  if (typeof body.instructions === "string" && body.instructions) messages.push({ role: "system", content: body.instructions });
  if (typeof body.input === "string") messages.push({ role: "user", content: body.input });
  else messages.push(...convertItems((body.input as unknown[]).filter(isObject)));
  const req: ChatRequest = { model: ctx.modelServed, messages };
  const max = body.max_output_tokens ?? body.max_tokens;
  if (typeof max === "number") req.max_tokens = max;
  for (const k of ["temperature", "top_p", "parallel_tool_calls", "stream"]) if (body[k] !== undefined && body[k] !== null) req[k] = body[k];
  const format = responseFormat(body.text);
  if (format) req.response_format = format;
  if (isObject(body.reasoning)) req.chat_template_kwargs = { enable_thinking: body.reasoning.effort !== "none" };
  addResponsesTools(body, req);
  return normalizeChat(req);
}

function check(body: Json): void {
  const c = new ShapeCheck("responses request");
  c.optString(body.model, "model");
  c.optString(body.instructions, "instructions");
  if (typeof body.input !== "string" && c.array(body.input, "input", true)) {
    body.input.forEach((item, i) => {
      if (!c.object(item, `input.${i}`)) return;
      const isMessage = item.type === undefined || item.type === "message";
      if (isMessage && typeof item.role !== "string") c.fail(`input.${i}.role`, "must be a string");
    });
  }
  c.optNumber(body.max_output_tokens, "max_output_tokens");
  if (body.tools !== undefined && body.tools !== null) c.array(body.tools, "tools");
  c.done();
}

/** Builds chat messages from items, keeping one assistant turn together. */
class TurnBuilder {
  readonly out: ChatMessage[] = [];
  private turn: ChatMessage | undefined;
  private reasoning: string[] = [];
  private userParts: Json[] = [];

  reason(text: string): void {
    if (this.turn && (this.turn.content || this.turn.tool_calls)) this.closeTurn();
    this.reasoning.push(text);
  }

  assistantText(text: string): void {
    const t = this.openTurn();
    t.content = t.content ? `${t.content as string}\n${text}` : text;
  }

  call(tc: ChatToolCall): void {
    const t = this.openTurn();
    (t.tool_calls ??= []).push(tc);
  }

  message(m: ChatMessage): void {
    this.flush();
    this.out.push(m);
  }

  userPart(p: Json): void {
    this.closeTurn();
    this.userParts.push(p);
  }

  flush(): void {
    this.closeTurn();
    if (this.reasoning.length) this.out.push({ role: "assistant", content: null, reasoning_content: this.reasoning.splice(0).join("\n") });
    this.flushUser();
  }

  private openTurn(): ChatMessage {
    this.flushUser();
    if (!this.turn) {
      this.turn = { role: "assistant", content: null };
      if (this.reasoning.length) this.turn.reasoning_content = this.reasoning.splice(0).join("\n");
      this.out.push(this.turn);
    }
    return this.turn;
  }

  private closeTurn(): void {
    this.turn = undefined;
  }

  private flushUser(): void {
    if (this.userParts.length) this.out.push({ role: "user", content: collapse(this.userParts.splice(0)) });
  }
}

function convertItems(items: Json[]): ChatMessage[] {
  const b = new TurnBuilder();
  for (const item of items) convertItem(b, item);
  b.flush();
  return b.out;
}

function convertItem(b: TurnBuilder, item: Json): void {
  switch (item.type ?? "message") {
    case "message":
      if (item.role === "assistant") {
        const text = partsText(item.content);
        if (text) b.assistantText(text);
      } else b.message({ role: item.role as ChatMessage["role"], content: messageContent(item.content) });
      return;
    case "reasoning": {
      const text = reasoningText(item);
      if (text) b.reason(text);
      return;
    }
    case "function_call":
      b.call({ id: String(item.call_id ?? item.id ?? ""), type: "function", function: { name: qualified(item), arguments: String(item.arguments ?? "{}") } });
      return;
    case "custom_tool_call":
      b.call({ id: String(item.call_id ?? item.id ?? ""), type: "function", function: { name: qualified(item), arguments: JSON.stringify({ input: item.input ?? "" }) } });
      return;
    case "local_shell_call": {
      const action = isObject(item.action) ? item.action : {};
      const { type: _t, ...args } = action;
      b.call({ id: String(item.call_id ?? item.id ?? ""), type: "function", function: { name: "shell", arguments: JSON.stringify(args) } });
      return;
    }
    case "function_call_output":
    case "custom_tool_call_output":
    case "local_shell_call_output":
      toolOutput(b, item);
      return;
    case "input_text":
    case "input_image":
      b.userPart(contentPart(item) ?? { type: "text", text: "" });
      return;
    default:
      // item_reference, web_search_call and other server-side items carry nothing the model re-reads.
      return;
  }
}

function qualified(item: Json): string {
  const name = String(item.name ?? "");
  return typeof item.namespace === "string" && item.namespace ? `${item.namespace}__${name}` : name;
}

function toolOutput(b: TurnBuilder, item: Json): void {
  const out = item.output;
  let text: string;
  const images: Json[] = [];
  if (typeof out === "string") text = out;
  else if (Array.isArray(out)) {
    const texts: string[] = [];
    for (const p of out.filter(isObject)) {
      const part = contentPart(p);
      if (part?.type === "image_url") images.push(part);
      else if (part?.type === "text") texts.push(part.text as string);
    }
    text = texts.join("\n");
  } else if (isObject(out)) {
    const inner = out.output ?? out.body ?? out.content;
    text = typeof inner === "string" ? inner : JSON.stringify(out);
  } else text = out === undefined || out === null ? "" : String(out);
  b.message({ role: "tool", tool_call_id: String(item.call_id ?? ""), content: text });
  if (images.length) b.message({ role: "user", content: images });
}

function reasoningText(item: Json): string {
  const fromParts = (v: unknown): string =>
    Array.isArray(v) ? v.filter(isObject).map((p) => (typeof p.text === "string" ? p.text : "")).filter(Boolean).join("\n") : "";
  return fromParts(item.content) || fromParts(item.summary) || decodeReasoning(item.encrypted_content) || "";
}

function contentPart(p: Json): Json | undefined {
  if ((p.type === "input_text" || p.type === "output_text" || p.type === "text") && typeof p.text === "string") return { type: "text", text: p.text };
  if (p.type === "refusal" && typeof p.refusal === "string") return { type: "text", text: p.refusal };
  if (p.type === "input_image" || p.type === "image_url") {
    const url = typeof p.image_url === "string" ? p.image_url : isObject(p.image_url) ? p.image_url.url : undefined;
    if (typeof url !== "string") return undefined;
    const image_url: Json = { url };
    if (p.detail === "auto" || p.detail === "low" || p.detail === "high") image_url.detail = p.detail;
    return { type: "image_url", image_url };
  }
  return undefined;
}

function messageContent(content: unknown): string | Json[] {
  if (typeof content === "string") return content;
  const parts = (Array.isArray(content) ? content : []).filter(isObject).map(contentPart).filter((p): p is Json => p !== undefined);
  return collapse(parts);
}

function partsText(content: unknown): string {
  const c = messageContent(content);
  return typeof c === "string" ? c : c.filter((p) => p.type === "text").map((p) => p.text as string).join("\n");
}

function collapse(parts: Json[]): string | Json[] {
  if (parts.every((p) => p.type === "text")) return parts.map((p) => p.text as string).join("\n");
  return parts;
}

function responseFormat(text: unknown): Json | undefined {
  if (!isObject(text) || !isObject(text.format)) return undefined;
  const f = text.format;
  if (f.type === "json_object") return { type: "json_object" };
  if (f.type === "json_schema") return { type: "json_schema", json_schema: { name: f.name ?? "output", schema: f.schema ?? {}, strict: f.strict ?? false } };
  return undefined;
}
