/**
 * The upstream client: a pool of engine URLs, each an undici keep-alive Pool,
 * balanced by least outstanding requests (ties go round-robin). A call is one
 * non-streaming POST; connection failures move on to the next upstream once,
 * timeouts become `timeout` (504), non-2xx answers become `upstream` errors
 * with the engine's status, and context-length refusals become
 * `context_length` so each dialect can say so in its own words.
 */
import { Pool, errors as undiciErrors } from "undici";
import { PolarError } from "../protocol/errors.ts";
import type { Json } from "./chat-types.ts";
import { isObject } from "./chat-types.ts";
import { isContextLengthMessage, proxyError } from "./errors.ts";

interface Target {
  url: string;
  pool: Pool;
  /** Path prefix of the base URL (without a trailing /v1). */
  prefix: string;
  outstanding: number;
}

export interface UpstreamOptions {
  timeoutMs: number;
  /** Keep-alive connections per upstream. */
  connections?: number;
}

export interface UpstreamReply {
  body: Json;
  url: string;
  ms: number;
}

export class UpstreamPool {
  private readonly targets: Target[];
  private next = 0;

  constructor(urls: readonly string[], private readonly opts: UpstreamOptions) {
    if (!urls.length) throw proxyError("validation", "at least one upstream URL is required");
    this.targets = urls.map((u) => makeTarget(u, opts.connections ?? 256));
  }

  /** POSTs JSON to `<upstream base><path>` (path like `/v1/chat/completions`); resolves with the parsed 2xx body. */
  async post(path: string, payload: string, signal?: AbortSignal, headers: Record<string, string> = {}): Promise<UpstreamReply> {
    const first = this.pick();
    try {
      return await this.send(first, path, payload, signal, headers);
    } catch (err) {
      if (!isConnectError(err) || this.targets.length < 2 || signal?.aborted) throw mapTransportError(err, first.url);
      const second = this.pick(first);
      try {
        return await this.send(second, path, payload, signal, headers);
      } catch (err2) {
        throw mapTransportError(err2, second.url);
      }
    }
  }

  /** GETs `<base><path>` of every upstream; resolves with each one's parsed 2xx body or its error. */
  async getAll(path: string, signal?: AbortSignal): Promise<Array<{ url: string; body?: Json; error?: PolarError }>> {
    return Promise.all(
      this.targets.map(async (t) => {
        try {
          const res = await t.pool.request({ path: t.prefix + path, method: "GET", headers: { accept: "application/json" }, headersTimeout: 10_000, bodyTimeout: 10_000, signal });
          const text = await readText(res.body);
          if (res.statusCode < 200 || res.statusCode >= 300) throw upstreamStatusError(res.statusCode, text, t.url);
          return { url: t.url, body: parseBody(text, t.url) };
        } catch (err) {
          return { url: t.url, error: mapTransportError(err, t.url) };
        }
      }),
    );
  }

  /** Outstanding requests per upstream URL. */
  load(): Record<string, number> {
    return Object.fromEntries(this.targets.map((t) => [t.url, t.outstanding]));
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.targets.map((t) => t.pool.close()));
  }

  private pick(avoid?: Target): Target {
    const n = this.targets.length;
    let best: Target | undefined;
    for (let k = 0; k < n; k++) {
      const t = this.targets[(this.next + k) % n];
      if (t === avoid) continue;
      if (!best || t.outstanding < best.outstanding) best = t;
    }
    this.next = (this.next + 1) % n;
    return best ?? this.targets[0];
  }

  private async send(t: Target, path: string, payload: string, signal: AbortSignal | undefined, extra: Record<string, string>): Promise<UpstreamReply> {
    const t0 = performance.now();
    t.outstanding++;
    try {
      const res = await t.pool.request({
        path: t.prefix + path,
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json", ...extra },
        body: payload,
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
        signal,
      });
      const text = await readText(res.body);
      if (res.statusCode < 200 || res.statusCode >= 300) throw upstreamStatusError(res.statusCode, text, t.url);
      return { body: parseBody(text, t.url), url: t.url, ms: performance.now() - t0 };
    } finally {
      t.outstanding--;
    }
  }
}

function makeTarget(url: string, connections: number): Target {
  const u = new URL(url);
  const prefix = u.pathname.replace(/\/+$/, "").replace(/\/v1$/, "");
  const pool = new Pool(u.origin, { connections, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000 });
  return { url, pool, prefix, outstanding: 0 };
}

/** The whole body as one flat string (decoded once, which JSON.parse reads fastest). */
async function readText(body: AsyncIterable<Buffer>): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of body) {
    chunks.push(c);
    size += c.length;
  }
  return (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)).toString("utf8");
}

function parseBody(text: string, url: string): Json {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw proxyError("upstream", `upstream ${url} answered with invalid JSON`, { status: 502 });
  }
  if (!isObject(v)) throw proxyError("upstream", `upstream ${url} answered with a non-object`, { status: 502 });
  return v;
}

/** An engine's non-2xx answer as a proxy error, keeping its status and message. */
export function upstreamStatusError(status: number, text: string, url: string): PolarError {
  const message = upstreamMessage(text) || `upstream ${url} answered HTTP ${status}`;
  if (status < 500 && isContextLengthMessage(message)) {
    return proxyError("context_length", message, { status: 400, reason: "context_length_exceeded", param: "messages" });
  }
  return proxyError("upstream", message, { status: status >= 400 ? status : 502 });
}

function upstreamMessage(text: string): string {
  try {
    const v = JSON.parse(text) as unknown;
    if (isObject(v)) {
      if (isObject(v.error) && typeof v.error.message === "string") return v.error.message;
      if (typeof v.message === "string") return v.message;
      if (typeof v.detail === "string") return v.detail;
      if (typeof v.error === "string") return v.error;
    }
  } catch {
    // not JSON: use the text itself
  }
  return text.slice(0, 2000);
}

function isConnectError(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return code === "ECONNREFUSED" || code === "ECONNRESET" || code === "UND_ERR_CONNECT_TIMEOUT" || code === "UND_ERR_SOCKET" || code === "ENOTFOUND";
}

function mapTransportError(err: unknown, url: string): PolarError {
  if (err instanceof PolarError) return err;
  if (err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError) {
    return proxyError("timeout", `upstream ${url} timed out`, { status: 504 }, err);
  }
  if ((err as { name?: string } | null)?.name === "AbortError") return proxyError("cancelled", "the call was cancelled", { status: 499 }, err);
  const msg = err instanceof Error ? err.message : String(err);
  return proxyError("upstream_unavailable", `upstream ${url} unreachable: ${msg}`, { status: 502 }, err);
}
