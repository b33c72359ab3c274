/**
 * The Anthropic event stream synthesized from one finished answer:
 * message_start, ping, then per block content_block_start, its deltas split
 * over several events (text_delta, thinking_delta then signature_delta,
 * input_json_delta), content_block_stop; then message_delta with the stop
 * reason and cumulative usage, and message_stop. Every frame has its
 * `event:` line (Claude Code needs them).
 */
import type { ChatResponse, Json } from "../chat-types.ts";
import { namedEvent, splitDeltas } from "../sse.ts";
import { anthropicBlocks, anthropicStop, anthropicUsage, messageId } from "./anthropic-response.ts";

export function anthropicStream(resp: ChatResponse, body: Json, modelRequested: string): string {
  const usage = anthropicUsage(resp);
  const message = {
    id: messageId(resp), type: "message", role: "assistant", model: modelRequested, content: [],
    stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 },
  };
  let out = namedEvent("message_start", { type: "message_start", message });
  out += namedEvent("ping", { type: "ping" });
  anthropicBlocks(resp.choices[0]).forEach((block, index) => (out += blockEvents(block, index)));
  out += namedEvent("message_delta", { type: "message_delta", delta: anthropicStop(resp, body), usage });
  return out + namedEvent("message_stop", { type: "message_stop" });
}

function blockEvents(block: Json, index: number): string {
  const delta = (d: Json): string => namedEvent("content_block_delta", { type: "content_block_delta", index, delta: d });
  let out = "";
  const start = (content_block: Json): void => void (out += namedEvent("content_block_start", { type: "content_block_start", index, content_block }));
  if (block.type === "thinking") {
    start({ type: "thinking", thinking: "", signature: "" });
    for (const p of splitDeltas(block.thinking as string)) out += delta({ type: "thinking_delta", thinking: p });
    out += delta({ type: "signature_delta", signature: block.signature });
  } else if (block.type === "text") {
    start({ type: "text", text: "" });
    for (const p of splitDeltas(block.text as string)) out += delta({ type: "text_delta", text: p });
  } else {
    start({ type: "tool_use", id: block.id, name: block.name, input: {} });
    for (const p of splitDeltas(JSON.stringify(block.input))) out += delta({ type: "input_json_delta", partial_json: p });
  }
  return out + namedEvent("content_block_stop", { type: "content_block_stop", index });
}
