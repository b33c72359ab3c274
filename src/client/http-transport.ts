/**
 * The client over the supervisor's HTTP API only: JSON for the task API,
 * server-sent events for results and traces (`GET /rollout/task/{id}/results`,
 * `GET /rollout/task/{id}/traces`), resumed from the last event id after a
 * dropped connection.
 */
import { errorFromWire, PolarError, type WireError } from "../protocol/errors.ts";
import type { InferenceReply, SubmitReply, TaskStatus } from "../protocol/schemas.ts";
import { readSse } from "./sse.ts";
import { statusPageSize } from "./status-pages.ts";
import type { StatusPage, Transport } from "./transport.ts";
import type { ResultMessage, StreamOptions, TraceMessage } from "./types.ts";

const MAX_RECONNECTS = 10;

export interface HttpTransportOptions {
  /** The API's bearer token (default: POLAR_API_TOKEN). */
  token?: string;
  /** Timeout of each task API request (ms, default 30 s); the event streams have their own reconnects. */
  timeoutMs?: number;
  /** Session summaries per status request (default 1,000, at most 10,000). */
  statusPageSize?: number;
}

export class HttpTransport implements Transport {
  readonly #base: string;
  readonly #auth: Record<string, string>;
  readonly #timeoutMs: number;
  readonly statusPageSize: number;

  constructor(api: string, opts: HttpTransportOptions = {}) {
    this.#base = api.replace(/\/+$/, "");
    const token = opts.token ?? process.env.POLAR_API_TOKEN;
    this.#auth = token ? { authorization: `Bearer ${token}` } : {};
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
    this.statusPageSize = statusPageSize(opts.statusPageSize);
  }

  async #json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const url = `${this.#base}${path}`;
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, {
        method,
        headers: body === undefined ? { ...this.#auth } : { ...this.#auth, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: timeout,
      });
      text = await res.text();
    } catch (err) {
      if (timeout.aborted) throw new PolarError("timeout", `no answer from ${method} ${url} within ${this.#timeoutMs} ms`, { cause: err });
      throw new PolarError("unavailable", `cannot reach the polar API at ${this.#base}: ${(err as Error).message}`, { cause: err });
    }
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : {};
    } catch (err) {
      if (!res.ok) throw fromHttp(res.status, undefined);
      throw new PolarError("internal", `${method} ${url} answered HTTP ${res.status} with a body that is not JSON`, { cause: err });
    }
    if (!res.ok) throw fromHttp(res.status, parsed);
    return parsed as T;
  }

  submit(task: unknown): Promise<SubmitReply> {
    return this.#json("POST", "/rollout/task/submit", task);
  }

  get(taskId: string, page?: StatusPage): Promise<TaskStatus> {
    const query = page ? `?offset=${page.offset}&limit=${page.limit}` : "";
    return this.#json("GET", `/rollout/task/${encodeURIComponent(taskId)}${query}`);
  }

  cancel(taskId: string): Promise<TaskStatus> {
    return this.#json("DELETE", `/rollout/task/${encodeURIComponent(taskId)}`);
  }

  pause(body: { timeout_seconds?: number }): Promise<InferenceReply> {
    return this.#json("POST", "/rollout/inference/pause", body);
  }

  resume(body: { policy_version: number }): Promise<InferenceReply> {
    return this.#json("POST", "/rollout/inference/resume", body);
  }

  results(taskId: string, _sessionIds: readonly string[], opts: StreamOptions): AsyncIterable<ResultMessage> {
    return this.#events<ResultMessage>(`/rollout/task/${encodeURIComponent(taskId)}/results`, "result", opts, (r) => r.session_id);
  }

  traces(taskId: string, _sessionIds: readonly string[], opts: StreamOptions): AsyncIterable<TraceMessage> {
    return this.#events<TraceMessage>(
      `/rollout/task/${encodeURIComponent(taskId)}/traces`,
      "trace",
      opts,
      (m) => `${m.session_id}:${m.attempt}:${m.trace_index}`,
    );
  }

  /** Follows an SSE endpoint until its `end` event, reconnecting from the last seen sequence. */
  async *#events<T extends { seq: number }>(path: string, kind: string, opts: StreamOptions, key: (v: T) => string): AsyncGenerator<T> {
    const seen = new Set<string>();
    let next = opts.fromSeq ?? 0;
    let failures = 0;
    for (;;) {
      const url = `${this.#base}${path}${next > 0 ? `?from_seq=${next}` : ""}`;
      let res: Response;
      try {
        res = await fetch(url, { headers: { ...this.#auth, accept: "text/event-stream" }, signal: opts.signal });
      } catch (err) {
        if (opts.signal?.aborted) return;
        if (++failures > MAX_RECONNECTS) throw new PolarError("unavailable", `lost ${url}: ${(err as Error).message}`, { cause: err });
        await new Promise((r) => setTimeout(r, 100 * 2 ** Math.min(failures, 6)));
        continue;
      }
      if (!res.ok || !res.body) throw fromHttp(res.status, await res.json().catch(() => ({})));
      try {
        for await (const ev of readSse(res.body, opts.signal)) {
          if (ev.event === "end") return;
          if (ev.event === "error") throw errorFromWire(JSON.parse(ev.data) as WireError);
          if (ev.event !== kind) continue;
          const value = JSON.parse(ev.data) as T;
          next = Math.max(next, value.seq + 1);
          failures = 0;
          const k = key(value);
          if (seen.has(k)) continue;
          seen.add(k);
          yield value;
        }
      } catch (err) {
        if (opts.signal?.aborted) return;
        if (err instanceof PolarError) throw err;
        if (++failures > MAX_RECONNECTS) throw new PolarError("unavailable", `lost ${url}: ${(err as Error).message}`, { cause: err });
      }
      if (opts.signal?.aborted) return;
      // The stream ended without `end`: the connection dropped; resume after the last event.
    }
  }

  async close(): Promise<void> {}
}

function fromHttp(status: number, raw: unknown): PolarError {
  const body = raw as { error?: WireError } | undefined;
  if (body?.error?.code) return errorFromWire(body.error);
  return new PolarError(status === 404 ? "not_found" : "internal", `HTTP ${status} from the polar API`);
}
