/**
 * The supervisor's Prometheus metrics: tasks submitted and finished, session
 * results by status, live sessions by stage, pending dispatches, nodes by
 * health, and the policy version. Counters move with the lifecycle events
 * the supervisor emits; gauges are read when scraped.
 */
import { Counter, Gauge, newRegistry, type Registry } from "./registry.ts";

export interface SupervisorMetricsSource {
  /** Live (not yet finished) sessions by their current stage. */
  liveStages(): Map<string, number>;
  /** Sessions waiting in the dispatch queue and running tasks (cheap status). */
  queue(): Promise<{ pending_sessions: number; running_tasks: number }>;
  nodes(): Promise<Array<{ healthy: boolean; kind?: string }>>;
  policyVersion?(): Promise<number> | number;
}

export interface SupervisorMetrics {
  readonly registry: Registry;
  /** Feed every lifecycle event the supervisor emits. */
  observe(kind: string, body: unknown): void;
}

export function supervisorMetrics(src: SupervisorMetricsSource): SupervisorMetrics {
  const registry = newRegistry({ actor: "supervisor" });
  const submitted = new Counter({ name: "polar_tasks_submitted_total", help: "Tasks accepted", registers: [registry] });
  const finished = new Counter({
    name: "polar_tasks_finished_total",
    help: "Tasks that ended, by final status",
    labelNames: ["status"],
    registers: [registry],
  });
  const results = new Counter({
    name: "polar_session_results_total",
    help: "Session results recorded, by status",
    labelNames: ["status"],
    registers: [registry],
  });
  new Gauge({
    name: "polar_sessions_live",
    help: "Sessions not yet finished, by their current stage as reported by gateways",
    labelNames: ["stage"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [stage, n] of src.liveStages()) this.set({ stage }, n);
    },
  });
  new Gauge({
    name: "polar_sessions_pending",
    help: "Session dispatches waiting in the work queue",
    registers: [registry],
    async collect() {
      this.set((await src.queue()).pending_sessions);
    },
  });
  new Gauge({
    name: "polar_tasks_running",
    help: "Tasks not yet finished",
    registers: [registry],
    async collect() {
      this.set((await src.queue()).running_tasks);
    },
  });
  new Gauge({
    name: "polar_nodes",
    help: "Registered nodes, by health",
    labelNames: ["healthy"],
    registers: [registry],
    async collect() {
      const nodes = await src.nodes();
      this.set({ healthy: "true" }, nodes.filter((n) => n.healthy).length);
      this.set({ healthy: "false" }, nodes.filter((n) => !n.healthy).length);
    },
  });
  new Gauge({
    name: "polar_policy_version",
    help: "Current policy version (the last one weights were resumed with)",
    registers: [registry],
    async collect() {
      this.set((await src.policyVersion?.()) ?? 0);
    },
  });
  return {
    registry,
    observe(kind, body) {
      const b = (body ?? {}) as { status?: unknown; session_id?: unknown };
      if (kind === "task.created") submitted.inc();
      else if (kind === "task.done" && typeof b.status === "string") finished.inc({ status: b.status });
      else if (kind === "task.updated" && typeof b.session_id === "string" && typeof b.status === "string") results.inc({ status: b.status });
    },
  };
}
