import type { Command } from "commander";
import { connectNats } from "../../nats/infra.ts";
import { resolveNatsAuth, resolveNatsUrl, withCreds } from "../common.ts";
import { followTask, formatSummary, readTaskFile, submitTask } from "../submit-flow.ts";

export function register(program: Command): void {
  program
    .command("submit")
    .description("submit a task (JSON file) over NATS; with --wait, follow it to the end and print per-session results")
    .argument("<task>", "task file (TaskRequest JSON, see config/tasks/)")
    .option("--nats <urls>", "NATS server URL(s), comma-separated for a cluster (default: POLAR_NATS_URL or the running `polar up`)")
    .option("--creds <file>", "NATS .creds file (user JWT and NKey seed, as nsc writes it) to authenticate with")
    .option("--wait", "wait until the task finishes, printing a line as each session's result lands")
    .option("--out <file>", "with --wait: write every trace to this JSONL file")
    .option("--json", "print the final TaskStatus as JSON")
    .action(async (file: string, o: { nats?: string; creds?: string; wait?: boolean; out?: string; json?: boolean }) => {
      const task = await readTaskFile(file);
      const url = await resolveNatsUrl(o.nats);
      const nc = await connectNats(url, "polar-cli", withCreds(await resolveNatsAuth(url), o.creds));
      try {
        const reply = await submitTask(nc, task);
        process.stdout.write(`submitted ${reply.task_id}: ${reply.total_sessions} sessions\n`);
        if (!o.wait) return;
        const { status: st, traces } = await followTask(nc, reply.task_id, { out: o.out, progress: { out: process.stdout } });
        if (o.json) process.stdout.write(`${JSON.stringify(st, null, 2)}\n`);
        else process.stdout.write(`${formatSummary(st)}\n`);
        if (o.out) process.stdout.write(`wrote ${traces} traces to ${o.out}\n`);
        if (st.status !== "completed") process.exitCode = 2;
      } finally {
        await nc.drain();
      }
    });
}
