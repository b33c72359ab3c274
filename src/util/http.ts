/** Small helpers for node:http servers: bounded JSON bodies, JSON answers, listen/close. */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { PolarError, ValidationError, toWireError } from "../protocol/errors.ts";

/** Reads a body up to `limit` bytes; rejects with payload_too_large past it. */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limit) throw new PolarError("payload_too_large", `request body of ${declared} bytes exceeds the limit of ${limit}`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new PolarError("payload_too_large", `request body exceeds the limit of ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const buf = await readBody(req, limit);
  if (!buf.length) return {};
  try {
    return JSON.parse(buf.toString("utf8"));
  } catch (err) {
    throw new ValidationError("request body", [{ path: "", message: "body is not valid JSON" }], { cause: err });
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const data = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(data), ...headers });
  res.end(data);
}

/** Answers an error as `{error: WireError}` with the code's HTTP status. */
export function sendError(res: ServerResponse, err: unknown): void {
  const status = err instanceof PolarError ? err.httpStatus : 500;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, status, { error: toWireError(err) });
}

export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      const addr = server.address();
      resolve(typeof addr === "object" && addr ? addr.port : port);
    });
  });
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections?.();
  });
}
