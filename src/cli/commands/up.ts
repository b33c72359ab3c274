import type { Command } from "commander";
import { gatewayOptionsFrom, loadConfig, supervisorSecurityFrom } from "../../app/config.ts";
import { up } from "../../app/up.ts";
import { connectNats } from "../../nats/infra.ts";
import { createLogger } from "../../util/log.ts";
import { clearUpState, untilSignal, writeUpState } from "../common.ts";
import { followTask, formatSummary, readTaskFile, submitTask } from "../submit-flow.ts";

export function register(program: Command): void {
  program
    .command("up")
    .description("run everything on this machine: embedded nats-server, supervisor, one gateway and the sim")
    .option("-c, --config <file>", "config file (JSON, see config/polar.example.json)")
    .option("--nats <url>", "use this NATS server instead of starting one")
    .option("--upstream <url...>", "use these inference servers instead of the sim")
    .option("--http-port <port>", "supervisor HTTP API port (0: any free port)", Number)
    .option("--playbook <file>", "sim playbook")
    .option("--max-model-len <tokens>", "sim context length (default 40960, Qwen3's; 131072 with YaRN fits Claude Code's prompt plus its 32k max_tokens)", Number)
    .option("--run <task>", "submit this task file, wait for it, print the results, then stop")
    .option("--out <file>", "with --run: write the traces to this JSONL file")
    .option("--log-level <level>", "log level (default: warn with --run, else info)")
    .action(async (o: { config?: string; nats?: string; upstream?: string[]; httpPort?: number; playbook?: string; maxModelLen?: number; run?: string; out?: string; logLevel?: string }) => {
      const config = await loadConfig(o.config);
      const log = createLogger({ level: o.logLevel ?? (o.run ? "warn" : "info") });
      const gw = gatewayOptionsFrom(config);
      const sys = await up({
        log,
        natsUrl: o.nats ?? config.nats_url,
        sim: o.upstream ? false : { playbookPath: o.playbook, ...(o.maxModelLen ? { maxModelLen: o.maxModelLen } : {}) },
        upstreams: o.upstream,
        supervisor: { http: { host: config.supervisor.http_host, port: o.httpPort ?? config.supervisor.http_port }, ...supervisorSecurityFrom(config) },
        gateway: { ...gw, proxy: { ...gw.proxy, upstreams: o.upstream ?? gw.proxy.upstreams } },
      });
      const urls = { nats_url: sys.natsUrl, api_url: sys.supervisor.httpUrl, proxy_url: sys.gateway.proxyUrl, sim_url: sys.sim?.url, pid: process.pid };
      await writeUpState(urls);
      process.stdout.write(
        `polar up\n  NATS        ${urls.nats_url}\n  task API    ${urls.api_url}\n  model proxy ${urls.proxy_url}\n  sim         ${urls.sim_url ?? "(external upstream)"}\n`,
      );
      try {
        if (o.run) await runOnce(sys.natsUrl, o.run, o.out);
        else {
          process.stdout.write("ready; Ctrl-C stops everything\n");
          await untilSignal();
        }
      } finally {
        await clearUpState();
        await sys.stop();
      }
    });
}

async function runOnce(natsUrl: string, file: string, out?: string): Promise<void> {
  const nc = await connectNats(natsUrl, "polar-cli");
  try {
    const reply = await submitTask(nc, await readTaskFile(file));
    process.stdout.write(`submitted ${reply.task_id}: ${reply.total_sessions} sessions\n`);
    const { status: st, traces } = await followTask(nc, reply.task_id, (l) => process.stdout.write(`${l}\n`), { out });
    process.stdout.write(`${formatSummary(st)}\n`);
    if (out) process.stdout.write(`wrote ${traces} traces to ${out}\n`);
    if (st.status !== "completed") process.exitCode = 2;
  } finally {
    await nc.drain();
  }
}
