/**
 * Google generateContent request to OpenAI chat. `systemInstruction` becomes
 * the system message; `model` contents become assistant turns (text parts
 * joined, `thought` parts as `reasoning_content` (or, when the client dropped
 * them, the reasoning our thoughtSignature carries), functionCall parts as
 * tool calls); functionResponse parts become `tool` messages. Function
 * declarations take `parameters` (OpenAPI-style, upper-case types) or
 * `parametersJsonSchema`; `thinkingConfig` switches `enable_thinking`.
 */
import type { ChatMessage, ChatRequest, ChatToolCall, Json } from "../chat-types.ts";
import { isObject } from "../chat-types.ts";
import type { CallContext } from "../dialect.ts";
import { decodeReasoning } from "../ids.ts";
import { normalizeChat } from "../normalize.ts";
import { ShapeCheck } from "../validate.ts";

/** Bodies may use REST camelCase or proto snake_case field names. */
function field(o: Json, camel: string, snake: string): unknown {
  return o[camel] ?? o[snake];
}

export function googleToChat(body: Json, ctx: CallContext, forCount = false): ChatRequest {
  const b = forCount && isObject(body.generateContentRequest) ? body.generateContentRequest : body;
  check(b);
  const messages: ChatMessage[] = [];
  const system = systemText(field(b, "systemInstruction", "system_instruction"));
  if (system) messages.push({ role: "system", content: system });
  const calls = new CallIds();
  for (const c of (b.contents as Json[]) ?? []) messages.push(...convertContent(c, calls));
  const req: ChatRequest = { model: ctx.modelServed, messages };
  if (!forCount) applyGenerationConfig(b, req);
  else applyThinking(b, req);
  addTools(b, req);
  return normalizeChat(req);
}

function check(body: Json): void {
  const c = new ShapeCheck("generateContent request");
  if (c.array(body.contents, "contents", true)) {
    body.contents.forEach((content, i) => {
      if (!c.object(content, `contents.${i}`)) return;
      c.array(content.parts, `contents.${i}.parts`);
    });
  }
  if (body.tools !== undefined) c.array(body.tools, "tools");
  const gc = field(body, "generationConfig", "generation_config");
  if (gc !== undefined && gc !== null && c.object(gc, "generationConfig")) {
    for (const [camel, snake] of GEN_MAP) c.optNumber(field(gc, camel, snake), `generationConfig.${camel}`);
  }
  c.done();
}

function systemText(si: unknown): string {
  if (typeof si === "string") return si;
  if (!isObject(si) || !Array.isArray(si.parts)) return "";
  return si.parts.filter(isObject).map((p) => (typeof p.text === "string" ? p.text : "")).filter(Boolean).join("\n");
}

/** Pairs functionCall parts without ids with their responses, by name and order. */
class CallIds {
  private pending = new Map<string, string[]>();
  private n = 0;
  forCall(name: string, id: unknown): string {
    const v = typeof id === "string" && id ? id : `call_${name}_${this.n++}`;
    const q = this.pending.get(name) ?? [];
    q.push(v);
    this.pending.set(name, q);
    return v;
  }
  forResponse(name: string, id: unknown): string {
    const q = this.pending.get(name);
    if (typeof id === "string" && id) {
      if (q) this.pending.set(name, q.filter((x) => x !== id));
      return id;
    }
    return q?.shift() ?? name;
  }
}

function convertContent(c: Json, calls: CallIds): ChatMessage[] {
  const parts = (c.parts as unknown[]).filter(isObject);
  if (c.role === "model" || c.role === "assistant") return [modelTurn(parts, calls)];
  if (c.role === "system" || c.role === "developer") return [{ role: "system", content: parts.map((p) => p.text ?? "").join("") }];
  return userTurn(parts, calls);
}

function modelTurn(parts: Json[], calls: CallIds): ChatMessage {
  let text = "";
  let thought = "";
  let signed: string | undefined;
  const toolCalls: ChatToolCall[] = [];
  for (const p of parts) {
    signed ??= decodeReasoning(field(p, "thoughtSignature", "thought_signature"));
    const fc = field(p, "functionCall", "function_call");
    if (isObject(fc)) {
      const name = String(fc.name ?? "");
      toolCalls.push({ id: calls.forCall(name, fc.id), type: "function", function: { name, arguments: JSON.stringify(fc.args ?? {}) } });
    } else if (typeof p.text === "string") {
      if (p.thought === true) thought += p.text;
      else text += p.text;
    }
  }
  const msg: ChatMessage = { role: "assistant", content: text || (toolCalls.length ? null : "") };
  // Thought parts when the client sent them back, else the reasoning our own signature carries.
  if (thought || signed) msg.reasoning_content = thought || signed;
  if (toolCalls.length) msg.tool_calls = toolCalls;
  return msg;
}

function userTurn(parts: Json[], calls: CallIds): ChatMessage[] {
  const out: ChatMessage[] = [];
  const rest: Json[] = [];
  for (const p of parts) {
    const fr = field(p, "functionResponse", "function_response");
    if (isObject(fr)) {
      const name = String(fr.name ?? "");
      out.push({ role: "tool", tool_call_id: calls.forResponse(name, fr.id), content: JSON.stringify(fr.response ?? {}) });
      continue;
    }
    if (typeof p.text === "string") rest.push({ type: "text", text: p.text });
    const inline = field(p, "inlineData", "inline_data");
    const file = field(p, "fileData", "file_data");
    if (isObject(inline) && String(field(inline, "mimeType", "mime_type") ?? "").startsWith("image/")) {
      rest.push({ type: "image_url", image_url: { url: `data:${field(inline, "mimeType", "mime_type")};base64,${inline.data}` } });
    } else if (isObject(file) && typeof field(file, "fileUri", "file_uri") === "string") {
      rest.push({ type: "image_url", image_url: { url: field(file, "fileUri", "file_uri") } });
    }
  }
  if (rest.length || !out.length) {
    const allText = rest.every((p) => p.type === "text");
    out.push({ role: "user", content: allText ? rest.map((p) => p.text as string).join("\n") : rest });
  }
  return out;
}

function applyThinking(b: Json, req: ChatRequest): void {
  const gc = field(b, "generationConfig", "generation_config");
  const tc = isObject(gc) ? field(gc, "thinkingConfig", "thinking_config") : undefined;
  if (!isObject(tc)) return;
  const budget = field(tc, "thinkingBudget", "thinking_budget");
  if (budget === 0) req.chat_template_kwargs = { enable_thinking: false };
  else if (field(tc, "includeThoughts", "include_thoughts") === true || typeof budget === "number" || tc.thinkingLevel !== undefined) {
    req.chat_template_kwargs = { enable_thinking: true };
  }
}

const GEN_MAP: [string, string, string][] = [
  ["maxOutputTokens", "max_output_tokens", "max_tokens"],
  ["temperature", "temperature", "temperature"],
  ["topP", "top_p", "top_p"],
  ["topK", "top_k", "top_k"],
  ["candidateCount", "candidate_count", "n"],
  ["presencePenalty", "presence_penalty", "presence_penalty"],
  ["frequencyPenalty", "frequency_penalty", "frequency_penalty"],
  ["seed", "seed", "seed"],
];

function applyGenerationConfig(b: Json, req: ChatRequest): void {
  const gc = field(b, "generationConfig", "generation_config");
  if (isObject(gc)) {
    for (const [camel, snake, to] of GEN_MAP) {
      const v = field(gc, camel, snake);
      if (v !== undefined && v !== null) req[to] = v;
    }
    const stops = field(gc, "stopSequences", "stop_sequences");
    if (Array.isArray(stops) && stops.length) req.stop = stops as string[];
    const format = responseFormat(gc);
    if (format) req.response_format = format;
  }
  applyThinking(b, req);
}

function responseFormat(gc: Json): Json | undefined {
  const mime = field(gc, "responseMimeType", "response_mime_type");
  if (mime !== "application/json") return undefined;
  const schema = field(gc, "responseJsonSchema", "response_json_schema") ?? field(gc, "responseSchema", "response_schema");
  if (!isObject(schema)) return { type: "json_object" };
  return { type: "json_schema", json_schema: { name: "google_response", schema: lowerTypes(schema) } };
}

/** Google's OpenAPI-style schemas spell types in upper case (`OBJECT`); JSON Schema wants lower case. */
export function lowerTypes(v: unknown): any {
  if (Array.isArray(v)) return v.map(lowerTypes);
  if (!isObject(v)) return v;
  const out: Json = {};
  for (const [k, x] of Object.entries(v)) {
    if (k === "type" && typeof x === "string") out[k] = x.toLowerCase();
    else if (k === "properties" && isObject(x)) out[k] = Object.fromEntries(Object.entries(x).map(([pk, pv]) => [pk, lowerTypes(pv)]));
    else out[k] = isObject(x) || Array.isArray(x) ? lowerTypes(x) : x;
  }
  return out;
}

function addTools(b: Json, req: ChatRequest): void {
  const tools: Json[] = [];
  for (const t of Array.isArray(b.tools) ? (b.tools as unknown[]).filter(isObject) : []) {
    const decls = field(t, "functionDeclarations", "function_declarations");
    for (const d of Array.isArray(decls) ? decls.filter(isObject) : []) {
      if (typeof d.name !== "string") continue;
      const params = field(d, "parametersJsonSchema", "parameters_json_schema") ?? (d.parameters !== undefined ? lowerTypes(d.parameters) : { type: "object", properties: {} });
      tools.push({ type: "function", function: { name: d.name, description: d.description ?? "", parameters: params } });
    }
  }
  if (!tools.length) return;
  req.tools = tools;
  const tc = field(b, "toolConfig", "tool_config");
  const fcc = isObject(tc) ? field(tc, "functionCallingConfig", "function_calling_config") : undefined;
  if (!isObject(fcc)) return;
  const allowed = field(fcc, "allowedFunctionNames", "allowed_function_names");
  if (fcc.mode === "NONE") req.tool_choice = "none";
  else if (fcc.mode === "ANY" || fcc.mode === "VALIDATED") {
    req.tool_choice = Array.isArray(allowed) && allowed.length === 1 ? { type: "function", function: { name: allowed[0] } } : "required";
  }
}
