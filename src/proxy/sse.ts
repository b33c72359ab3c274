/** Helpers shared by the stream synthesizers: SSE framing and delta splitting. */

/** An SSE frame with an `event:` line (Anthropic, Responses). */
export function namedEvent(type: string, data: unknown): string {
  return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** An SSE frame with only a `data:` line (OpenAI Chat, Google). */
export function dataEvent(data: unknown): string {
  return `data: ${JSON.stringify(data)}\n\n`;
}

/**
 * Splits text into a few deltas the way a real stream arrives: pieces of about
 * len/8 characters (at least 8), never splitting a UTF-16 surrogate pair.
 * Empty text gives no pieces.
 */
export function splitDeltas(text: string, minPiece = 8, maxPieces = 8): string[] {
  if (!text) return [];
  const size = Math.max(minPiece, Math.ceil(text.length / maxPieces));
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    let end = Math.min(text.length, i + size);
    const c = text.charCodeAt(end - 1);
    if (end < text.length && c >= 0xd800 && c <= 0xdbff) end++;
    out.push(text.slice(i, end));
    i = end;
  }
  return out;
}

export const SSE_HEADERS: Record<string, string> = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "x-accel-buffering": "no",
};
