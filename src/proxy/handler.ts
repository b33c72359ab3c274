/**
 * One HTTP request, end to end: route, authenticate, read and convert the
 * body, call the upstream, store the record, answer in the client's dialect.
 * Every failure is answered in the client's vendor error format; nothing is
 * recorded unless the upstream answered and the call was well-formed.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../util/log.ts";
import type { Json } from "./chat-types.ts";
import type { ApiType, CallContext, Dialect } from "./dialect.ts";
import { dialectOf } from "./dialects/index.ts";
import { detectByBody, detectRoute, headerCredential, splitCredentialPath, type Route } from "./detect.ts";
import { engineWeightVersion, normalizeResponse, withEngineFlags } from "./engine.ts";
import { asProxyError, errorStatus, proxyError } from "./errors.ts";
import { checkContentType, decodeBody, parseJsonObject, readBody } from "./http-body.ts";
import { answerMeta } from "./meta-routes.ts";
import { countTokens } from "./count-tokens.ts";
import { fitOutputTokens, type ContextLimit } from "./context-fit.ts";
import { buildRecord, nextSeq } from "./record.ts";
import { sideKind } from "./side-calls.ts";
import { SSE_HEADERS } from "./sse.ts";
import type { CaptureSink, PeerDirectory, ProxyObserver, ProxyOptions, ProxySession, ProxyStats, SessionDirectory } from "./types.ts";
import { admitPeer } from "./binding.ts";
import type { UpstreamPool } from "./upstream.ts";
import type { BusyClock } from "./busy.ts";
import { serveMetrics, type Registry } from "../metrics/registry.ts";
import type { InferenceGate } from "./gate.ts";


export interface HandlerDeps {
  sessions: SessionDirectory;
  sink: CaptureSink;
  log: Logger;
  upstream: UpstreamPool;
  opts: ProxyOptions;
  stats: ProxyStats;
  busy: BusyClock;
  observer?: ProxyObserver;
  /** Served at `GET /metrics` (Prometheus text format) when given. */
  metrics?: Registry;
  /** Holds upstream calls while inference is paused; stamps the policy version. */
  gate: InferenceGate;
  /** The upstreams' context length, learned from `GET /v1/models`. */
  contextLimit: ContextLimit;
  /** Credentials bound to their sandbox (undefined: not checked). */
  peers?: PeerDirectory;
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export function createHandler(d: HandlerDeps): Handler {
  return (req, res) => {
    d.stats.requests++;
    d.stats.inflight++;
    serve(d, req, res)
      .catch((err: unknown) => fail(d, res, err, "openai_chat"))
      .finally(() => d.stats.inflight--);
  };
}

async function serve(d: HandlerDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const receivedAt = performance.now();
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const rawPath = q < 0 ? url : url.slice(0, q);
  const query = new URLSearchParams(q < 0 ? "" : url.slice(q + 1));
  const method = req.method ?? "GET";
  if (rawPath === "/health" && method === "GET") return sendJson(res, 200, { status: "ok", inflight: d.stats.inflight });
  if (d.metrics && serveMetrics(d.metrics, req, res)) return;
  // Known as early as possible, so a failure at any step is answered in the right dialect.
  let apiType: ApiType = "openai_chat";
  try {
    const { credential: pathCred, path } = splitCredentialPath(rawPath);
    const route = detectRoute(method, path, req.headers);
    apiType = route?.apiType ?? apiType;
    if (!route) throw proxyError("not_found", `no route for ${method} ${path}`);
    if (route.pathError) throw route.pathError;
    const credential = pathCred ?? headerCredential(req.headers, query);
    const session = authenticate(d.sessions, credential);
    let admitMs = 0;
    // Whether this connection may use the credential (a /proc lookup for a TCP-bound session) is
    // decided while the body is read and parsed; nothing is answered or sent upstream before it.
    const admitted = admitPeer(d.peers, req.socket, session).then(() => void (admitMs = performance.now() - receivedAt));
    admitted.catch(() => undefined); // awaited below on every path; this only keeps an early throw from leaving it unhandled
    if (route.op === "list_models" || route.op === "get_model") {
      await admitted;
      return sendJson(res, 200, answerMeta(route, apiType, modelServed(d, session)));
    }
    let body: Json;
    let dialect: Dialect;
    let ctx: CallContext;
    try {
      checkContentType(req);
      const raw = await readBody(req, d.opts.maxBodyBytes);
      body = parseJsonObject(decodeBody(raw, header(req, "content-encoding"), d.opts.maxBodyBytes));
      apiType = route.apiType ?? detectByBody(body);
      dialect = dialectOf(apiType);
      ctx = { apiType, path, query, modelRequested: "", modelServed: modelServed(d, session) };
      ctx.modelRequested = route.pathModel ?? dialect.modelOf(body, ctx);
    } finally {
      await admitted; // a refused credential is answered as such, whatever else is wrong with the request
    }
    if (route.op === "count_tokens") return await count(d, res, dialect, ctx, body);
    await generate(d, res, { dialect, ctx, body, session, route, credential: credential as string, receivedAt, admitMs });
  } catch (err) {
    fail(d, res, err, apiType);
  }
}

interface Generation {
  dialect: Dialect;
  ctx: CallContext;
  body: Json;
  session: ProxySession;
  route: Route;
  credential: string;
  /** When the request reached the handler (performance.now()), and how long its peer check took from then. */
  receivedAt: number;
  admitMs: number;
}

async function generate(d: HandlerDeps, res: ServerResponse, g: Generation): Promise<void> {
  const { dialect, ctx, body, session } = g;
  const chatReq = dialect.toChat(body, ctx);
  const stream = g.route.googleStream || dialect.wantsStream(body, ctx);
  let payload = JSON.stringify(withEngineFlags(chatReq, d.opts.flavor));
  const abort = new AbortController();
  const onClose = (): void => {
    if (!res.writableEnded) abort.abort();
  };
  res.once("close", onClose);
  try {
    // Ask for no more output than the engine's context leaves after the prompt.
    const clamp = await fitOutputTokens(chatReq, Buffer.byteLength(payload), await d.contextLimit.get(), (r) => countTokens(d.upstream, d.opts.flavor, r, abort.signal));
    if (clamp) payload = JSON.stringify(withEngineFlags(chatReq, d.opts.flavor));
    // While inference is paused the call waits here: the client just sees a slower answer.
    const ticket = await d.gate.enter(abort.signal);
    const sentAt = performance.now();
    let reply;
    try {
      // The session id lets a sampling server tell the samples of a group apart (engines ignore the header).
      reply = await timedUpstream(d, () =>
        d.upstream.post("/v1/chat/completions", payload, abort.signal, { "x-polar-session-id": session.sessionId }),
      );
    } finally {
      ticket.leave();
    }
    const seq = nextSeq();
    // A session that left RUNNING while the engine worked (cancelled, timed out, superseded) gets no record.
    authenticate(d.sessions, g.credential);
    const weightVersion = engineWeightVersion(reply.body);
    const { response, timings } = normalizeResponse(reply.body, d.opts.flavor);
    timings.upstream_ms = reply.ms;
    if (ticket.heldMs > 0) timings.held_ms = ticket.heldMs;
    // The proxy's own share before the call: reading, the peer check, converting, fitting, any pause.
    timings.proxy_in_ms = round2(sentAt - g.receivedAt);
    if (g.admitMs > 0) timings.admit_ms = round2(g.admitMs);
    const record = buildRecord({
      session, apiType: ctx.apiType, request: chatReq, original: body, response, seq,
      sideKind: sideKind(chatReq, ctx.modelRequested), modelRequested: ctx.modelRequested, timings, clamp,
      policyVersion: ticket.policyVersion, engineWeightVersion: weightVersion,
    });
    try {
      await d.sink.record(session.sessionId, record);
    } catch (err) {
      throw proxyError("internal", "the completion could not be stored", { status: 500 }, err);
    }
    d.stats.captured++;
    d.observer?.captured(ctx.apiType);
    if (stream) sendRaw(res, 200, streamHeaders(dialect, ctx), dialect.toStream(response, body, ctx));
    else sendJson(res, 200, dialect.fromChat(response, body, ctx));
  } finally {
    res.off("close", onClose);
  }
}

const round2 = (ms: number): number => Math.round(ms * 100) / 100;

/** One upstream call, counted in the busy clock and the latency histogram. */
async function timedUpstream<T>(d: HandlerDeps, call: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  d.busy.begin();
  let ok = false;
  try {
    const r = await call();
    ok = true;
    return r;
  } finally {
    d.busy.end();
    d.observer?.upstream((performance.now() - t0) / 1000, ok);
  }
}

async function count(d: HandlerDeps, res: ServerResponse, dialect: Dialect, ctx: CallContext, body: Json): Promise<void> {
  if (!dialect.counting) throw proxyError("not_found", `token counting is not part of the ${ctx.apiType} API`);
  const req = dialect.counting.toChat(body, ctx);
  sendJson(res, 200, dialect.counting.reply(await countTokens(d.upstream, d.opts.flavor, req)));
}

function streamHeaders(dialect: Dialect, ctx: CallContext): Record<string, string> {
  const type = dialect.streamContentType?.(ctx);
  return type ? { "content-type": type } : SSE_HEADERS;
}

function authenticate(sessions: SessionDirectory, credential: string | undefined): ProxySession {
  if (!credential) throw proxyError("unauthorized", "no session credential: send it as the API key", { reason: "missing_session_credential" });
  const session = sessions.lookup(credential);
  if (!session) throw proxyError("unauthorized", "unknown session credential", { reason: "invalid_session_credential" });
  if (!session.active) throw proxyError("forbidden", "the session is not running", { reason: "inactive_session_credential" });
  return session;
}

function modelServed(d: HandlerDeps, s: ProxySession): string {
  return s.modelServed || d.opts.modelServed;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function fail(d: HandlerDeps, res: ServerResponse, err: unknown, apiType: ApiType): void {
  const e = asProxyError(err);
  d.stats.errors++;
  const status = errorStatus(e);
  d.observer?.error(apiType, status);
  if (status >= 500) d.log.warn({ err: e, code: e.code, apiType }, "proxy call failed");
  else d.log.debug({ code: e.code, apiType, msg: e.message }, "proxy call refused");
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  const reply = dialectOf(apiType).errorReply(e, { apiType });
  sendRaw(res, reply.status, { "content-type": "application/json", ...reply.headers }, JSON.stringify(reply.body));
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  sendRaw(res, status, { "content-type": "application/json" }, JSON.stringify(body));
}

function sendRaw(res: ServerResponse, status: number, headers: Record<string, string>, text: string): void {
  const buf = Buffer.from(text, "utf8");
  res.writeHead(status, { ...headers, "content-length": buf.length });
  res.end(buf);
}
