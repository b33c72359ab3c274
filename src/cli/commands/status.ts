import type { Command } from "commander";
import { connectNats } from "../../nats/infra.ts";
import { request } from "../../nats/messages.ts";
import type { SystemStatus, TaskStatus } from "../../protocol/schemas.ts";
import { SUBJECTS } from "../../protocol/subjects.ts";
import { resolveNatsAuth, resolveNatsUrl, withCreds } from "../common.ts";
import { fetchTask, formatSummary } from "../submit-flow.ts";

export function register(program: Command): void {
  program
    .command("status")
    .description("show pending sessions, running tasks and gateway nodes; with a task id, that task's sessions")
    .argument("[task_id]", "a task to show")
    .option("--nats <urls>", "NATS server URL(s), comma-separated for a cluster (default: POLAR_NATS_URL or the running `polar up`)")
    .option("--creds <file>", "NATS .creds file (user JWT and NKey seed, as nsc writes it) to authenticate with")
    .option("--json", "print JSON")
    .option("--results", "with a task id and --json: include its SessionResults")
    .action(async (taskId: string | undefined, o: { nats?: string; creds?: string; json?: boolean; results?: boolean }) => {
      const url = await resolveNatsUrl(o.nats);
      const nc = await connectNats(url, "polar-cli", withCreds(await resolveNatsAuth(url), o.creds));
      try {
        if (taskId) {
          const st = await fetchTask(nc, taskId, { withResults: o.json && o.results });
          process.stdout.write(o.json ? `${JSON.stringify(st, null, 2)}\n` : `${formatSummary(st)}\n`);
          return;
        }
        const s = await request<SystemStatus>(nc, SUBJECTS.api.status, {});
        if (o.json) return void process.stdout.write(`${JSON.stringify(s, null, 2)}\n`);
        process.stdout.write(`pending sessions: ${s.pending_sessions}\nrunning tasks: ${s.running_tasks}\nnodes: ${s.nodes.length}\n`);
        for (const p of s.unserved_pools ?? []) {
          process.stdout.write(`  pool ${p.pool}: ${p.pending_sessions} sessions waiting and NO live gateway serves it\n`);
        }
        for (const n of s.nodes) {
          const m = n.metrics;
          process.stdout.write(
            `  ${n.node_id} ${n.healthy ? "healthy" : "UNHEALTHY"}${n.draining ? " draining" : ""} pool=${n.pool} init=${m.init_inflight}/${n.max_init_workers} init_queue=${m.init_queue_depth} ready=${m.ready_depth} run=${m.run_inflight}/${n.max_run_workers} postrun=${m.postrun_inflight}/${n.max_postrun_workers} postrun_queue=${m.postrun_queue_depth} eval_waiting=${m.eval_waiting} loop_delay_p99=${m.loop_delay_p99_ms}ms proxy=${n.gateway_url}\n`,
          );
        }
        const evs = s.evaluators ?? [];
        process.stdout.write(`evaluators: ${evs.length} (pending evaluations: ${s.pending_evaluations ?? 0})\n`);
        for (const e of evs) {
          const m = e.metrics;
          process.stdout.write(
            `  ${e.node_id} ${e.healthy ? "healthy" : "UNHEALTHY"}${e.draining ? " draining" : ""} pool=${e.pool} ${e.hosted_by ? `in=${e.hosted_by}` : `host=${e.host}`} evaluating=${m.inflight}/${e.max_concurrency} completed=${m.completed} failed=${m.failed} redelivered=${m.redelivered} expired=${m.expired}\n`,
          );
        }
      } finally {
        await nc.drain();
      }
    });
}
