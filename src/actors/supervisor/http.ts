/**
 * The trainer API over HTTP, same schemas and errors as over NATS:
 * POST /rollout/task/submit, GET|DELETE /rollout/task/{id}, GET /rollout/status,
 * GET /nodes, POST /rollout/nodes/{id}/drain, GET /health, GET /events (server-sent events), GET /rollout/task/{id}/traces
 * and /results (a task's traces or results as server-sent events, with replay). POST /rollout/inference/pause|resume and
 * GET /rollout/inference (weight sync). Errors are `{"error": {code, message, retryable, details}}`.
 */
import { createServer, type Server } from "node:http";
import type { Logger } from "pino";
import { PolarError, ValidationError } from "../../protocol/errors.ts";
import { readJson, sendError, sendJson } from "../../util/http.ts";
import type { TaskService } from "./tasks.ts";
import type { NatsConnection } from "@nats-io/transport-node";
import { streamEvents } from "./events.ts";
import { decodeSegment } from "../../util/uri.ts";
import { streamTaskSse } from "./task-sse.ts";
import { drainNode } from "./drain.ts";
import type { InferenceService } from "./inference.ts";
import { authorizeRequest, type ApiTokens } from "../../security/http-auth.ts";
import { dashboardRoute } from "./dashboard-api.ts";
import { serveAsset } from "../../dashboard/static.ts";
import { serveMetrics, type Registry } from "../../metrics/registry.ts";

export interface ApiServerOptions {
  /** Served at `GET /metrics` (Prometheus text format). */
  metrics?: Registry;
  /** Weight sync: POST /rollout/inference/pause|resume, GET /rollout/inference. */
  inference?: InferenceService;
  /** Bearer tokens; without any, every request passes (the API then listens on loopback only). */
  tokens?: ApiTokens;
}

const MAX_BODY = 8 * 1024 * 1024;

export function createApiServer(tasks: TaskService, nc: NatsConnection, log: Logger, opts: ApiServerOptions = {}): Server {
  return createServer((req, res) => {
    const path = req.url?.split("?")[0] ?? "/";
    const open = req.method === "GET" && (path === "/health" || path === "/" || path.startsWith("/assets/")); // static, no data
    try {
      if (!open) authorizeRequest(req, opts.tokens);
    } catch (err) {
      req.resume(); // the body is not read
      log.warn({ method: req.method, url: req.url?.slice(0, 200), code: (err as PolarError).code }, "API request refused");
      return sendError(res, err);
    }
    if (req.method === "GET" && path === "/events") return streamEvents(nc, res);
    if (opts.metrics && serveMetrics(opts.metrics, req, res)) return;
    if (req.method === "GET" && (path === "/" || path.startsWith("/assets/"))) {
      void serveAsset(path, res)
        .then((served) => served || sendError(res, new PolarError("not_found", `no asset ${path}`)))
        .catch((err) => sendError(res, err));
      return;
    }
    let url: URL;
    try {
      url = parseUrl(req.url);
    } catch (err) {
      return sendError(res, err);
    }
    const sse = /^\/rollout\/task\/([^/]+)\/(traces|results)\/?$/.exec(url.pathname);
    if (req.method === "GET" && sse) {
      let taskId: string;
      try {
        taskId = decodeSegment(sse[1], "the task id in the path");
      } catch (err) {
        return sendError(res, err);
      }
      return void streamTaskSse(sse[2] as "traces" | "results", taskId, { tasks, nc, log }, url, req, res);
    }
    Promise.resolve()
      .then(() => route(tasks, nc, req.method ?? "GET", url, req, opts.inference))
      .then((body) => sendJson(res, 200, body))
      .catch((err) => {
        if (!(err instanceof PolarError)) log.error({ err, url: req.url }, "API request failed");
        sendError(res, err);
      });
  });
}

/** The request target; a malformed one is a 400, never an exception in the request listener. */
function parseUrl(raw: string | undefined): URL {
  try {
    return new URL(raw ?? "/", "http://x");
  } catch (err) {
    throw new PolarError("validation", "malformed request target", { details: { target: String(raw).slice(0, 200) }, cause: err });
  }
}

async function route(tasks: TaskService, nc: NatsConnection, method: string, url: URL, req: Parameters<typeof readJson>[0], inference?: InferenceService): Promise<unknown> {
  const path = url.pathname.replace(/\/+$/, "") || "/";
  if (inference && path.startsWith("/rollout/inference")) {
    if (path === "/rollout/inference/pause" && method === "POST") return inference.pause(await readJson(req, MAX_BODY));
    if (path === "/rollout/inference/resume" && method === "POST") return inference.resume(await readJson(req, MAX_BODY));
    if (path === "/rollout/inference" && method === "GET") return inference.state();
  }
  if (path === "/health" && method === "GET") {
    const nodes = await tasks.nodes();
    return { status: "ok", nodes: nodes.filter((n) => n.healthy).length };
  }
  if (path === "/rollout/task/submit" && method === "POST") return tasks.submit(await readJson(req, MAX_BODY));
  if (path === "/rollout/status" && method === "GET") return tasks.status();
  if (path === "/nodes" && method === "GET") return { nodes: await tasks.nodes() };
  const drain = /^\/rollout\/nodes\/([^/]+)\/drain$/.exec(path);
  if (drain && method === "POST") {
    const body = await readJson(req, 64 * 1024);
    if (!body || typeof body !== "object" || Array.isArray(body)) {
      throw new ValidationError("drain request", [{ path: "", message: "body must be a JSON object like {\"timeout_seconds\": 60}" }]);
    }
    return drainNode(nc, { ...body, node_id: decodeSegment(drain[1], "the node id in the path") });
  }
  if (path.startsWith("/dashboard/api/")) return dashboardRoute(tasks, method, path, url);
  const m = /^\/rollout\/task\/([^/]+)$/.exec(path);
  if (m) {
    const task_id = decodeSegment(m[1], "the task id in the path");
    if (method === "GET") return tasks.get({ task_id, ...pageQuery(url) });
    if (method === "DELETE") {
      return tasks.cancel({ task_id, register_if_missing: url.searchParams.get("register_if_missing") === "true" });
    }
  }
  throw new PolarError("not_found", `no route ${method} ${path}`);
}

/** `?results=true&offset=N&limit=N` of a task status poll (validated by the TaskGet schema). */
function pageQuery(url: URL): Record<string, unknown> {
  const q: Record<string, unknown> = {};
  const results = url.searchParams.get("results");
  if (results !== null) q.with_results = results === "true" || results === "1" ? true : results === "false" || results === "0" ? false : results;
  for (const k of ["offset", "limit"]) {
    const v = url.searchParams.get(k);
    if (v !== null) q[k] = /^\d+$/.test(v) ? Number(v) : v;
  }
  return q;
}
