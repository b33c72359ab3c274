/**
 * Gemini's `alt=sse` stream from one finished answer: thought chunks, text
 * split over several chunks, then a last chunk with the function calls,
 * `finishReason` and `usageMetadata`. Without `alt=sse` Google streams a JSON
 * array of the same chunks; that form is answered too.
 */
import type { ChatResponse, Json } from "../chat-types.ts";
import { dataEvent, splitDeltas } from "../sse.ts";
import { googleChunk, googleParts } from "./google-response.ts";

export function googleChunks(resp: ChatResponse, modelRequested: string): Json[] {
  const p = googleParts(resp);
  const chunks: Json[] = [];
  for (const t of splitDeltas((p.thought?.text as string) ?? "")) chunks.push(googleChunk(resp, modelRequested, [{ text: t, thought: true }], false));
  const texts = splitDeltas((p.text?.text as string) ?? "");
  const lastText = p.calls.length ? undefined : texts.pop();
  for (const t of texts) chunks.push(googleChunk(resp, modelRequested, [{ text: t }], false));
  const finalParts = p.calls.length ? p.calls : [{ text: lastText ?? "" }];
  chunks.push(googleChunk(resp, modelRequested, finalParts, true));
  return chunks;
}

export function googleStream(resp: ChatResponse, modelRequested: string): string {
  return googleChunks(resp, modelRequested).map(dataEvent).join("");
}
