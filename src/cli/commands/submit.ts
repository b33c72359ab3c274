import type { Command } from "commander";
import { connectNats } from "../../nats/infra.ts";
import { resolveNatsUrl } from "../common.ts";
import { formatSummary, readTaskFile, submitTask, waitForTask, writeTraces } from "../submit-flow.ts";

export function register(program: Command): void {
  program
    .command("submit")
    .description("submit a task (JSON file) over NATS; with --wait, follow it to the end and print per-session results")
    .argument("<task>", "task file (TaskRequest JSON, see config/tasks/)")
    .option("--nats <url>", "NATS server URL (default: POLAR_NATS_URL or the running `polar up`)")
    .option("--wait", "wait until the task finishes, printing progress")
    .option("--out <file>", "with --wait: write every trace to this JSONL file")
    .option("--json", "print the final TaskStatus as JSON")
    .action(async (file: string, o: { nats?: string; wait?: boolean; out?: string; json?: boolean }) => {
      const task = await readTaskFile(file);
      const nc = await connectNats(await resolveNatsUrl(o.nats), "polar-cli");
      try {
        const reply = await submitTask(nc, task);
        process.stdout.write(`submitted ${reply.task_id}: ${reply.total_sessions} sessions\n`);
        if (!o.wait) return;
        const st = await waitForTask(nc, reply.task_id, (l) => process.stdout.write(`${l}\n`));
        if (o.json) process.stdout.write(`${JSON.stringify(st, null, 2)}\n`);
        else process.stdout.write(`${formatSummary(st)}\n`);
        if (o.out) {
          const expected = st.sessions.reduce((a, s) => a + s.trace_count, 0);
          const n = await writeTraces(nc, reply.task_id, o.out, expected);
          process.stdout.write(`wrote ${n} traces to ${o.out}\n`);
        }
        if (st.status !== "completed") process.exitCode = 2;
      } finally {
        await nc.drain();
      }
    });
}
