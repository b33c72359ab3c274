/**
 * The capturing proxy's boundary with the gateway. The proxy is an HTTP server
 * that speaks each vendor's API; the gateway tells it which credentials are
 * live and receives every captured completion.
 */
import type { CompletionRecord } from "../protocol/schemas.ts";
import type { InferenceGate } from "./gate.ts";

export interface ProxySession {
  sessionId: string;
  taskId: string;
  attempt: number;
  /** Model name the upstream serves for this session (overrides the client's). */
  modelServed?: string;
  /** Dispatch metadata copied into each record's metadata. */
  metadata: Record<string, unknown>;
  /** False once the session left RUNNING (finished, cancelled, stale attempt): calls get 403. */
  active: boolean;
}

export interface SessionDirectory {
  /** The session a credential belongs to, or undefined (the call gets 401). */
  lookup(credential: string): ProxySession | undefined;
}

/**
 * Where a session's credential may be used from (the runtime says; see
 * SECURITY.md). `socket`: only connections on the session's own socket
 * (`ProxyHandle.openSessionSocket`); `tcp`: only loopback TCP connections
 * whose client socket is held by one of these processes or a descendant.
 */
export type PeerBinding = { via: "socket" } | { via: "tcp"; roots(): Iterable<number> | Promise<Iterable<number>> };

export interface PeerDirectory {
  /** The binding of a session attempt, or undefined (its credential works from anywhere but other sessions' sockets). */
  bindingOf(session: ProxySession): PeerBinding | undefined;
}

export interface CaptureSink {
  /** Stores one record; the proxy awaits it before answering the client. */
  record(sessionId: string, record: CompletionRecord): Promise<void>;
}

export type UpstreamFlavor = "vllm" | "sglang";

export interface ProxyOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Also listen on this Unix socket (for sandboxes without a network). */
  socketPath?: string;
  upstreams: string[];
  flavor: UpstreamFlavor;
  /** Default served model name when a session names none. */
  modelServed: string;
  maxBodyBytes: number;
  upstreamTimeoutMs: number;
  /**
   * "auto" (default): a credential is refused outside its session's sandbox
   * wherever the runtime tells where that is (its own socket, or its process
   * tree over TCP); "off": any holder of a live credential may use it.
   */
  bindCredentials?: "auto" | "off";
}

export interface ProxyStats {
  requests: number;
  captured: number;
  errors: number;
  inflight: number;
  /** Upstream calls in flight now. */
  upstream_inflight: number;
  /** Milliseconds (since start) during which at least one upstream call was in flight. */
  upstream_busy_ms: number;
}

/** Observes proxy traffic for metrics; every method is cheap and never throws. */
export interface ProxyObserver {
  /** One upstream call finished (`ok`: the engine answered 2xx). */
  upstream(seconds: number, ok: boolean): void;
  captured(apiType: string): void;
  /** A call answered with an error, in the client's dialect. */
  error(apiType: string, status: number): void;
}

export interface ProxyHandle {
  readonly url: string;
  readonly port: number;
  readonly socketPath?: string;
  stats(): ProxyStats;
  /** The gate every upstream call passes (inference pause/resume). */
  readonly gate: InferenceGate;
  /**
   * Listens on a Unix socket for one session only: a request on it must carry
   * that session's credential. Resolves once bound; `close()` stops listening,
   * ends its connections and removes the socket file (it is also closed by
   * `stop()`).
   */
  openSessionSocket(sessionId: string, path: string): Promise<{ close(): Promise<void> }>;
  stop(): Promise<void>;
  readonly closed: Promise<void>;
}
