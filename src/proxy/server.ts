/**
 * The capturing model proxy: an HTTP server (TCP, and optionally a Unix
 * socket) that speaks each vendor's model API, forwards every call to the
 * upstream engine non-streaming with token capture on, stores a
 * CompletionRecord through the sink before answering, and answers (or
 * streams) in the client's dialect.
 */
import { createServer, type Server } from "node:http";
import { createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { rm } from "node:fs/promises";
import type { Logger } from "../util/log.ts";
import { createHandler } from "./handler.ts";
import type { CaptureSink, PeerDirectory, ProxyHandle, ProxyObserver, ProxyOptions, ProxyStats, SessionDirectory } from "./types.ts";
import { tagConnection } from "./binding.ts";
import { UpstreamPool } from "./upstream.ts";
import { BusyClock } from "./busy.ts";
import type { Registry } from "../metrics/registry.ts";
import { InferenceGate } from "./gate.ts";
import { ContextLimit } from "./context-fit.ts";

export interface ProxyDeps {
  sessions: SessionDirectory;
  sink: CaptureSink;
  log: Logger;
  /** Metrics: traffic observer, and the registry served at `GET /metrics`. */
  observer?: ProxyObserver;
  metrics?: Registry;
  /** Pause/resume of upstream calls (default: an open gate at policy version 0). */
  gate?: InferenceGate;
  /** Where each session's credential may be used from (see binding.ts); ignored when `bindCredentials` is "off". */
  peers?: PeerDirectory;
}

/**
 * Starts listening; resolves once every listener is bound. `stop()` is
 * idempotent: it stops accepting, lets in-flight calls finish (closing idle
 * keep-alive connections at once and the rest after a short grace), then
 * closes the upstream pools; `closed` resolves when all of that is done.
 */
export async function startProxy(deps: ProxyDeps, opts: ProxyOptions): Promise<ProxyHandle> {
  const stats: ProxyStats = { requests: 0, captured: 0, errors: 0, inflight: 0, upstream_inflight: 0, upstream_busy_ms: 0 };
  const busy = new BusyClock();
  const upstream = new UpstreamPool(opts.upstreams, { timeoutMs: opts.upstreamTimeoutMs });
  const gate = deps.gate ?? new InferenceGate();
  const peers = opts.bindCredentials === "off" ? undefined : deps.peers;
  const handler = createHandler({ ...deps, peers, gate, upstream, opts, stats, busy, contextLimit: new ContextLimit(upstream) });
  const servers: Server[] = [];
  try {
    const tcp = configure(createServer(handler));
    servers.push(tcp);
    await listen(tcp, { host: opts.host, port: opts.port });
    if (opts.socketPath) {
      await rm(opts.socketPath, { force: true });
      const unix = configure(createServer(handler));
      servers.push(unix);
      await listen(unix, { path: opts.socketPath });
    }
  } catch (err) {
    await closeServers(servers);
    await upstream.close();
    throw err;
  }
  const addr = servers[0].address();
  const port = typeof addr === "object" && addr ? addr.port : opts.port;
  const host = opts.host === "0.0.0.0" || opts.host === "::" || opts.host === "" ? "127.0.0.1" : opts.host;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  deps.log.info({ url, socketPath: opts.socketPath, upstreams: opts.upstreams.length, flavor: opts.flavor }, "proxy listening");

  const sessionSockets = new Set<{ close(): Promise<void> }>();
  const openSessionSocket = async (sessionId: string, path: string): Promise<{ close(): Promise<void> }> => {
    const conns = new Set<Socket>();
    const listener = createNetServer((sock) => {
      conns.add(sock);
      sock.once("close", () => conns.delete(sock));
      tagConnection(sock, sessionId);
      servers[0].emit("connection", sock);
    });
    await rm(path, { force: true });
    await listen(listener, { path });
    let done: Promise<void> | undefined;
    const handle = {
      close: () =>
        (done ??= (async () => {
          sessionSockets.delete(handle);
          await new Promise<void>((resolve) => {
            listener.close(() => resolve());
            for (const c of conns) c.destroy();
          });
          await rm(path, { force: true });
        })()),
    };
    sessionSockets.add(handle);
    return handle;
  };

  let closing: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (closing ??= (async () => {
      await Promise.all([...sessionSockets].map((s) => s.close()));
      await closeServers(servers);
      await upstream.close();
      if (opts.socketPath) await rm(opts.socketPath, { force: true });
      deps.log.info("proxy stopped");
    })());
  let resolveClosed!: () => void;
  const closed = new Promise<void>((r) => (resolveClosed = r));
  return {
    url,
    port,
    socketPath: opts.socketPath,
    stats: () => ({ ...stats, upstream_inflight: busy.inflight, upstream_busy_ms: busy.totalMs() }),
    gate,
    openSessionSocket,
    stop: () => stop().then(resolveClosed),
    closed,
  };
}

function configure(server: Server): Server {
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  // requestTimeout (Node's default, 300 s) bounds only receiving the request; generation time is the upstream timeout's.
  return server;
}

/**
 * Connections the kernel may hold for the proxy before it accepts them (capped
 * by net.core.somaxconn). Node's default of 511 overflowed with 1,024 live
 * sessions opening a connection per call: the kernel then drops the
 * handshake's last packet, and the client, already "connected", waits out
 * retransmission backoff (tens of seconds) instead of a short queue.
 */
export const LISTEN_BACKLOG = 4096;

function listen(server: Server | NetServer, where: { host?: string; port?: number; path?: string }): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ ...where, backlog: LISTEN_BACKLOG }, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

const CLOSE_GRACE_MS = 2_000;

function closeServers(servers: Server[]): Promise<unknown> {
  return Promise.all(
    servers.map(
      (s) =>
        new Promise<void>((resolve) => {
          if (!s.listening) return resolve();
          const timer = setTimeout(() => s.closeAllConnections(), CLOSE_GRACE_MS);
          timer.unref();
          s.close(() => {
            clearTimeout(timer);
            resolve();
          });
          s.closeIdleConnections();
        }),
    ),
  );
}
