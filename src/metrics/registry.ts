/**
 * Prometheus metrics (text exposition format) through prom-client. Each actor
 * owns its own Registry (never prom-client's global one), so two actors in one
 * process (`polar up`) expose separate, non-colliding sets.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Registry } from "prom-client";

export { Counter, Gauge, Histogram, Registry } from "prom-client";

/** Seconds buckets for model calls: from a cached prefix to a long generation. */
export const UPSTREAM_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export function newRegistry(labels: Record<string, string> = {}): Registry {
  const r = new Registry();
  r.setDefaultLabels(labels);
  return r;
}

/** Answers `GET /metrics` from a registry; returns false for any other request. */
export function serveMetrics(registry: Registry, req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method !== "GET" || (req.url ?? "").split("?")[0] !== "/metrics") return false;
  registry.metrics().then(
    (text) => {
      res.writeHead(200, { "content-type": registry.contentType, "content-length": Buffer.byteLength(text) });
      res.end(text);
    },
    (err: unknown) => {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(`metrics collection failed: ${(err as Error).message}\n`);
    },
  );
  return true;
}
