/**
 * A gateway's Prometheus metrics: its stages (depth and capacity), the
 * sessions it finished by status, and its proxy's model traffic (upstream
 * latency histogram, captured calls, errors by dialect and status, busy
 * time). Stage gauges are read when scraped, so they cost nothing between
 * scrapes.
 */
import type { NodeStageMetrics } from "../protocol/schemas.ts";
import type { ProxyObserver, ProxyStats } from "../proxy/types.ts";
import { Counter, Gauge, Histogram, newRegistry, UPSTREAM_BUCKETS, type Registry } from "./registry.ts";

export interface GatewayMetricsSource {
  stages(): NodeStageMetrics;
  capacity(): { init: number; ready: number; run: number; postrun: number };
  proxy(): ProxyStats;
  /** The policy version in force on this node (0 until one is set). */
  policyVersion?(): number;
}

export interface GatewayMetrics {
  readonly registry: Registry;
  readonly observer: ProxyObserver;
  sessionFinished(status: string): void;
  finishedTotal(): number;
}

/** Stage depths as exposed: queued and in-flight work of each stage. */
export function stageDepths(m: NodeStageMetrics): Record<string, number> {
  return {
    init_queue: m.init_queue_depth,
    init: m.init_inflight,
    ready: m.ready_depth,
    run: m.run_inflight,
    postrun_queue: m.postrun_queue_depth,
    postrun: m.postrun_inflight,
  };
}

export function gatewayMetrics(nodeId: string, src: GatewayMetricsSource): GatewayMetrics {
  const registry = newRegistry({ node_id: nodeId });
  new Gauge({
    name: "polar_gateway_stage_depth",
    help: "Sessions in each stage of the gateway pipeline (queued or in flight)",
    labelNames: ["stage"],
    registers: [registry],
    collect() {
      for (const [stage, v] of Object.entries(stageDepths(src.stages()))) this.set({ stage }, v);
    },
  });
  new Gauge({
    name: "polar_gateway_stage_capacity",
    help: "Workers (INIT, RUN, POSTRUN) or buffer slots (READY) of each stage",
    labelNames: ["stage"],
    registers: [registry],
    collect() {
      for (const [stage, v] of Object.entries(src.capacity())) this.set({ stage }, v);
    },
  });
  const finished = new Counter({
    name: "polar_gateway_sessions_finished_total",
    help: "Sessions this gateway finished, by final status",
    labelNames: ["status"],
    registers: [registry],
  });
  const latency = new Histogram({
    name: "polar_proxy_upstream_request_duration_seconds",
    help: "Duration of model calls from the proxy to the inference engine",
    labelNames: ["outcome"],
    buckets: UPSTREAM_BUCKETS,
    registers: [registry],
  });
  const captured = new Counter({
    name: "polar_proxy_captured_calls_total",
    help: "Model calls captured as CompletionRecords, by client API",
    labelNames: ["api_type"],
    registers: [registry],
  });
  const errors = new Counter({
    name: "polar_proxy_errors_total",
    help: "Proxy calls answered with an error, by client dialect and HTTP status",
    labelNames: ["dialect", "status"],
    registers: [registry],
  });
  new Counter({
    name: "polar_proxy_upstream_busy_seconds_total",
    help: "Time during which at least one model call was in flight to the engines",
    registers: [registry],
    collect() {
      const s = src.proxy().upstream_busy_ms / 1000;
      this.reset();
      this.inc(s);
    },
  });
  new Gauge({
    name: "polar_proxy_upstream_inflight",
    help: "Model calls in flight to the engines",
    registers: [registry],
    collect() {
      this.set(src.proxy().upstream_inflight);
    },
  });
  new Gauge({
    name: "polar_policy_version",
    help: "Policy version in force for new model calls",
    registers: [registry],
    collect() {
      this.set(src.policyVersion?.() ?? 0);
    },
  });
  let total = 0;
  return {
    registry,
    observer: {
      upstream: (seconds, ok) => latency.observe({ outcome: ok ? "ok" : "error" }, seconds),
      captured: (apiType) => captured.inc({ api_type: apiType }),
      error: (dialect, status) => errors.inc({ dialect, status: String(status) }),
    },
    sessionFinished(status) {
      total++;
      finished.inc({ status });
    },
    finishedTotal: () => total,
  };
}
