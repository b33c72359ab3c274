/**
 * Reading a client body: bounded (the configured limit; an oversized body is
 * drained without being buffered, then refused with 413), JSON only (415
 * otherwise), gzip/deflate/br request encodings accepted.
 */
import type { IncomingMessage } from "node:http";
import { brotliDecompressSync, gunzipSync, inflateSync } from "node:zlib";
import type { PolarError } from "../protocol/errors.ts";
import { LIMITS, shapeOf } from "../protocol/schemas.ts";
import { isObject, type Json } from "./chat-types.ts";
import { proxyError } from "./errors.ts";

/** Content types a JSON body may come with (some clients send text/plain or none). */
function isJsonType(ct: string | undefined): boolean {
  if (!ct) return true;
  const base = ct.split(";", 1)[0].trim().toLowerCase();
  return base === "application/json" || base.endsWith("+json") || base === "text/plain";
}

/** Checks the content type before reading; throws `unsupported_media_type`. */
export function checkContentType(req: IncomingMessage): void {
  if (!isJsonType(req.headers["content-type"])) {
    throw proxyError("unsupported_media_type", `unsupported content type ${req.headers["content-type"]}: send application/json`);
  }
}

export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = Number.isFinite(declared) && declared > limit;
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size > limit) over = true;
      if (!over) chunks.push(c);
    };
    const cleanup = (): void => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
    };
    const onEnd = (): void => {
      cleanup();
      if (over) reject(tooLarge(limit));
      else resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(proxyError("validation", `could not read the request body: ${err.message}`, {}, err));
    };
    const onClose = (): void => {
      if (req.complete) return;
      cleanup();
      reject(proxyError("cancelled", "the client closed the connection", { status: 499 }));
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
    req.on("close", onClose);
  });
}

function tooLarge(limit: number): PolarError {
  return proxyError("payload_too_large", `request body exceeds the limit of ${limit} bytes`);
}

export function decodeBody(raw: Buffer, encoding: string | undefined, limit: number): Buffer {
  const enc = (encoding ?? "identity").trim().toLowerCase();
  if (enc === "identity" || enc === "") return raw;
  const opts = { maxOutputLength: limit };
  try {
    if (enc === "gzip" || enc === "x-gzip") return gunzipSync(raw, opts);
    if (enc === "deflate") return inflateSync(raw, opts);
    if (enc === "br") return brotliDecompressSync(raw, opts);
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") throw tooLarge(limit);
    throw proxyError("validation", `could not decode the ${enc} request body`, {}, err);
  }
  throw proxyError("unsupported_media_type", `unsupported content encoding ${enc}`);
}

export function parseJsonObject(buf: Buffer): Json {
  let v: unknown;
  try {
    v = JSON.parse(buf.toString("utf8"));
  } catch (err) {
    throw proxyError("validation", `the request body is not valid JSON: ${(err as Error).message}`);
  }
  if (!isObject(v)) throw proxyError("validation", "the request body must be a JSON object");
  // Converting and forwarding walk the body recursively: bound it before anything else does.
  if (shapeOf(v, LIMITS.proxyBodyDepth).depth > LIMITS.proxyBodyDepth) {
    throw proxyError("validation", `the request body is nested deeper than the limit of ${LIMITS.proxyBodyDepth} levels`);
  }
  // The model name is echoed in answers and stored in every record.
  if (typeof v.model === "string" && v.model.length > LIMITS.nameChars) {
    throw proxyError("validation", `model is longer than the limit of ${LIMITS.nameChars} characters`, { param: "model" });
  }
  return v;
}
