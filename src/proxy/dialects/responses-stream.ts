/**
 * The Responses event stream synthesized from one finished answer. Items are
 * opened and closed one after another (reasoning, message, calls), each with
 * its added/delta/done events and consistent ids and indices, because the
 * official accumulator rejects anything else; `response.completed` (or
 * `response.incomplete`) ends the stream with the full object and usage.
 */
import type { ChatResponse, Json } from "../chat-types.ts";
import { hexId } from "../ids.ts";
import { namedEvent, splitDeltas } from "../sse.ts";
import { responseObject, responsesOutput } from "./responses-response.ts";

class Emitter {
  text = "";
  private seq = 0;
  emit(type: string, data: Json): void {
    this.text += namedEvent(type, { type, sequence_number: this.seq++, ...data });
  }
}

export function responsesStream(resp: ChatResponse, body: Json, modelRequested: string): string {
  const id = hexId("resp_", 32);
  const output = responsesOutput(resp, body);
  const e = new Emitter();
  const pending = responseObject(resp, body, modelRequested, id, false, []);
  e.emit("response.created", { response: pending });
  e.emit("response.in_progress", { response: pending });
  output.forEach((item, i) => itemEvents(e, item, i));
  const final = responseObject(resp, body, modelRequested, id, true, output);
  e.emit(final.status === "incomplete" ? "response.incomplete" : final.status === "failed" ? "response.failed" : "response.completed", { response: final });
  return e.text;
}

function itemEvents(e: Emitter, item: Json, output_index: number): void {
  const item_id = item.id as string;
  if (item.type === "reasoning") {
    e.emit("response.output_item.added", { output_index, item: { ...item, summary: [], encrypted_content: undefined } });
    const text = (item.summary as Json[])[0].text as string;
    const at = { item_id, output_index, summary_index: 0 };
    e.emit("response.reasoning_summary_part.added", { ...at, part: { type: "summary_text", text: "" } });
    for (const delta of splitDeltas(text)) e.emit("response.reasoning_summary_text.delta", { ...at, delta });
    e.emit("response.reasoning_summary_text.done", { ...at, text });
    e.emit("response.reasoning_summary_part.done", { ...at, part: { type: "summary_text", text } });
  } else if (item.type === "message") {
    e.emit("response.output_item.added", { output_index, item: { ...item, status: "in_progress", content: [] } });
    const part = (item.content as Json[])[0];
    const at = { item_id, output_index, content_index: 0 };
    e.emit("response.content_part.added", { ...at, part: { ...part, text: "" } });
    for (const delta of splitDeltas(part.text as string)) e.emit("response.output_text.delta", { ...at, delta, logprobs: [] });
    e.emit("response.output_text.done", { ...at, text: part.text, logprobs: [] });
    e.emit("response.content_part.done", { ...at, part });
  } else if (item.type === "function_call") {
    e.emit("response.output_item.added", { output_index, item: { ...item, status: "in_progress", arguments: "" } });
    for (const delta of splitDeltas(item.arguments as string)) e.emit("response.function_call_arguments.delta", { item_id, output_index, delta });
    e.emit("response.function_call_arguments.done", { item_id, output_index, name: item.name, arguments: item.arguments });
  } else if (item.type === "custom_tool_call") {
    e.emit("response.output_item.added", { output_index, item: { ...item, status: "in_progress", input: "" } });
    for (const delta of splitDeltas(item.input as string)) e.emit("response.custom_tool_call_input.delta", { item_id, output_index, delta });
    e.emit("response.custom_tool_call_input.done", { item_id, output_index, input: item.input });
  } else {
    e.emit("response.output_item.added", { output_index, item: { ...item, status: "in_progress" } });
  }
  e.emit("response.output_item.done", { output_index, item });
}
