/**
 * Small HTTP helpers for the simulator: bounded JSON bodies, JSON and
 * server-sent-event answers, and vLLM-style OpenAI error bodies.
 */
import type { IncomingMessage, ServerResponse } from "node:http";

/** An error answered as `{"error": {message, type, param, code}}` with its HTTP status (vLLM's ErrorResponse). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = status === 404 ? "NotFoundError" : status >= 500 ? "InternalServerError" : "BadRequestError",
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

export function badRequest(message: string, param: string | null = null): HttpError {
  return new HttpError(400, message, "BadRequestError", param);
}

export async function readJson(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw new HttpError(413, `request body exceeds ${maxBytes} bytes`, "BadRequestError");
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (!text.trim()) return {};
  try {
    return JSON.parse(text);
  } catch (err) {
    throw badRequest(`request body is not valid JSON: ${(err as Error).message}`);
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const data = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(data), ...headers });
  res.end(data);
}

export function sendText(res: ServerResponse, status: number, text: string, contentType = "text/plain; charset=utf-8"): void {
  res.writeHead(status, { "content-type": contentType, "content-length": Buffer.byteLength(text) });
  res.end(text);
}

export function sendError(res: ServerResponse, err: HttpError): void {
  if (res.headersSent) {
    res.destroy(err);
    return;
  }
  sendJson(res, err.status, { error: { message: err.message, type: err.type, param: err.param, code: err.status } });
}

/** Starts an SSE answer; `write` sends one `data:` event, `end` sends `[DONE]` and closes. */
export function startSse(res: ServerResponse, headers: Record<string, string> = {}) {
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive", ...headers });
  res.flushHeaders();
  return {
    write(data: unknown): void {
      res.write(`data: ${JSON.stringify(data)}\n\n`);
    },
    end(done = true): void {
      if (done) res.write("data: [DONE]\n\n");
      res.end();
    },
  };
}

/** An AbortSignal that fires when the client goes away before the answer is complete. */
export function clientGone(req: IncomingMessage, res: ServerResponse): AbortSignal {
  const ac = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) ac.abort(new Error("client disconnected"));
  });
  req.on("error", () => ac.abort(new Error("client request error")));
  return ac.signal;
}
