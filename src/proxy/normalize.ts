/**
 * The normalization every converted request gets (all dialects): the
 * `developer` role becomes `system`, all system messages merge into one first
 * message (chat templates such as Qwen's accept a system prompt only there),
 * and Qwen3.5-family served models default to thinking off.
 */
import type { ChatMessage, ChatRequest, Json } from "./chat-types.ts";

export function normalizeChat(req: ChatRequest): ChatRequest {
  req.messages = mergeSystem(req.messages);
  if (/qwen3\.5/i.test(req.model)) {
    const kw = { ...(req.chat_template_kwargs ?? {}) };
    if (!("enable_thinking" in kw)) kw.enable_thinking = false;
    req.chat_template_kwargs = kw;
  }
  return req;
}

function mergeSystem(messages: ChatMessage[]): ChatMessage[] {
  let systems = 0;
  for (const m of messages) if (m.role === "system" || m.role === "developer") systems++;
  if (systems === 0) return messages;
  if (systems === 1 && messages[0].role === "system") return messages;
  const texts: string[] = [];
  const rest: ChatMessage[] = [];
  for (const m of messages) {
    if (m.role === "system" || m.role === "developer") {
      const t = contentText(m.content);
      if (t) texts.push(t);
    } else rest.push(m);
  }
  return [{ role: "system", content: texts.join("\n\n") }, ...rest];
}

/** The text of a chat content (string or parts), parts joined by "\n". */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  const out: string[] = [];
  for (const p of content as Json[]) {
    if (typeof p === "string") out.push(p);
    else if (p && typeof p.text === "string") out.push(p.text);
  }
  return out.join("\n");
}
