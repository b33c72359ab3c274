/**
 * `startSim`: an HTTP server that answers like vLLM serving Qwen3 (and like
 * SGLang on its native /generate), with a scripted or random policy in place
 * of model weights. See docs/sim.md.
 *
 * Lifecycle: resolves once listening; `stop()` is idempotent, ends open
 * connections and resolves when the server is closed; `closed` resolves then.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "../util/log.ts";
import { silentLogger } from "../util/log.ts";
import { SimEngine } from "./engine.ts";
import { clientGone, HttpError, readJson, sendError } from "./http.ts";
import { parseSimOptions, type SimOptions } from "./options.ts";
import { routes, type Route } from "./routes/index.ts";
import type { SimMetrics } from "./scheduler.ts";

export type { SimOptions } from "./options.ts";
export type { SimMetrics } from "./scheduler.ts";

export interface SimHandle {
  /** http://HOST:PORT, no path. */
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
  readonly closed: Promise<void>;
  metrics(): SimMetrics;
  /** Changes the policy version stamped on every later answer. */
  setPolicyVersion(v: string): void;
  /** New generations wait; in-flight ones finish. */
  pause(): void;
  resume(): void;
  [Symbol.asyncDispose](): Promise<void>;
}

export async function startSim(opts: Partial<SimOptions> & { log?: Logger } = {}): Promise<SimHandle> {
  const { log = silentLogger(), ...rest } = opts;
  const options = parseSimOptions(rest);
  const engine = new SimEngine(options);
  const table = routes(engine);
  const server = createServer((req, res) => void handle(engine, table, req, res, log, options.maxBodyBytes));
  server.keepAliveTimeout = 60_000;
  await listen(server, options.port, options.host);
  const port = (server.address() as AddressInfo).port;
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  const url = `http://${host}:${port}`;
  log.info({ url, model: options.modelName, policy: options.policy, slots: options.slots }, "sim listening");
  let stopping: Promise<void> | undefined;
  let markClosed!: () => void;
  const closed = new Promise<void>((r) => (markClosed = r));
  const stop = () =>
    (stopping ??= new Promise<void>((resolve) => {
      engine.scheduler.resume();
      server.close(() => {
        engine.close();
        markClosed();
        resolve();
      });
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 2000).unref();
    }));
  return {
    url,
    port,
    stop,
    closed,
    metrics: () => engine.scheduler.metrics(engine.policyVersion),
    setPolicyVersion: (v) => {
      engine.policyVersion = v;
    },
    pause: () => engine.scheduler.pause(),
    resume: () => engine.scheduler.resume(),
    [Symbol.asyncDispose]: stop,
  };
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

async function handle(engine: SimEngine, table: Map<string, Route>, req: IncomingMessage, res: ServerResponse, log: Logger, maxBody: number) {
  const url = new URL(req.url ?? "/", "http://sim");
  const route = table.get(`${req.method} ${url.pathname}`);
  try {
    if (!route) {
      const allowed = [...table.keys()].some((k) => k.endsWith(` ${url.pathname}`));
      throw allowed ? new HttpError(405, "Method Not Allowed", "MethodNotAllowed") : new HttpError(404, "Not Found", "NotFoundError");
    }
    const body = req.method === "POST" ? await readJson(req, maxBody) : undefined;
    await route({ req, res, body, url, signal: clientGone(req, res) });
  } catch (err) {
    if (res.destroyed) return;
    if (err instanceof HttpError) return sendError(res, err);
    log.error({ err, path: url.pathname }, "sim request failed");
    sendError(res, new HttpError(500, `internal error: ${(err as Error)?.message ?? String(err)}`));
  }
}
