import type { Command } from "commander";
import { gatewayOptionsFrom, loadConfig, supervisorSecurityFrom } from "../../app/config.ts";
import { up } from "../../app/up.ts";
import { connectNats, natsServers } from "../../nats/infra.ts";
import { createLogger } from "../../util/log.ts";
import { clearUpState, exitSoon, upStatePath, watchSignals, writeUpState } from "../common.ts";
import type { NatsAuth } from "../../security/nats-auth.ts";
import { followTask, formatSummary, readTaskFile, submitTask } from "../submit-flow.ts";

export function register(program: Command): void {
  program
    .command("up")
    .description("run everything on this machine: embedded nats-server, supervisor, one gateway and the sim")
    .option("-c, --config <file>", "config file (JSON, see config/polar.example.json)")
    .option("--nats <urls>", "use these NATS servers (comma-separated, one cluster) instead of starting one")
    .option("--upstream <url...>", "use these inference servers instead of the sim")
    .option("--http-port <port>", "supervisor HTTP API port (0: any free port)", Number)
    .option("--playbook <file>", "sim playbook")
    .option("--policy <name>", "sim policy: script (default), random or learnable (choose logits set by POST /admin/weights)")
    .option("--max-run <n>", "RUNNING stage workers of the gateway", Number)
    .option("--max-model-len <tokens>", "sim context length (default 40960, Qwen3's native context)", Number)
    .option("--run <task>", "submit this task file, wait for it, print the results, then stop")
    .option("--out <file>", "with --run: write the traces to this JSONL file")
    .option("--log-level <level>", "log level (default: warn with --run, else info)")
    .option("--drain-timeout <seconds>", "on SIGTERM/SIGINT, how long the gateway's held sessions may finish before everything stops (default 300)", Number)
    .action(async (o: { config?: string; nats?: string; upstream?: string[]; httpPort?: number; playbook?: string; policy?: "script" | "random" | "learnable"; maxRun?: number; maxModelLen?: number; run?: string; out?: string; logLevel?: string; drainTimeout?: number }) => {
      const config = await loadConfig(o.config);
      const log = createLogger({ level: o.logLevel ?? (o.run ? "warn" : "info") });
      const gw = gatewayOptionsFrom(config);
      const sys = await up({
        log,
        natsUrl: o.nats ?? (config.nats_url === undefined ? undefined : natsServers(config.nats_url).join(",")),
        sim: o.upstream ? false : { playbookPath: o.playbook, ...(o.policy ? { policy: o.policy } : {}), ...(o.maxModelLen ? { maxModelLen: o.maxModelLen } : {}) },
        upstreams: o.upstream,
        supervisor: { http: { host: config.supervisor.http_host, port: o.httpPort ?? config.supervisor.http_port }, ...supervisorSecurityFrom(config) },
        gateway: {
          ...gw,
          ...(o.maxRun ? { limits: { ...gw.limits, maxRunWorkers: o.maxRun, readyCapacity: Math.max(gw.limits.readyCapacity ?? 0, o.maxRun) } } : {}),
          proxy: { ...gw.proxy, upstreams: o.upstream ?? gw.proxy.upstreams },
        },
      });
      const api = sys.supervisor.httpUrl;
      const urls = { nats_url: sys.natsUrl, api_url: api, dashboard_url: api && `${api}/`, proxy_url: sys.gateway.proxyUrl, sim_url: sys.sim?.url, pid: process.pid };
      const { supervisor: _own, ...shared } = sys.credentials ?? {};
      await writeUpState({ ...urls, ...(sys.credentials ? { nats_credentials: shared } : {}) });
      process.stdout.write(
        [
          "polar up",
          `  dashboard   ${urls.dashboard_url ?? "(no HTTP API)"}`,
          `  NATS        ${urls.nats_url}${sys.credentials ? ` (credentials per role in ${upStatePath()})` : ""}`,
          `  task API    ${urls.api_url ?? "(none)"}`,
          `  model proxy ${urls.proxy_url}   (metrics: ${urls.proxy_url}/metrics)`,
          `  sim         ${urls.sim_url ?? "(external upstream)"}`,
          "",
        ].join("\n"),
      );
      const drainMs = o.drainTimeout !== undefined && o.drainTimeout > 0 ? o.drainTimeout * 1000 : gw.drainTimeoutMs;
      // First signal: drain the gateway, then stop the rest; second: requeue what is held and stop now; third: exit.
      const unwatch = watchSignals({
        first: (s) => {
          process.stderr.write(`polar up: ${s}: draining (up to ${drainMs / 1000} s), then stopping; send it again to stop now\n`);
          void sys.drain(drainMs).finally(() => sys.stop());
        },
        second: (s) => {
          process.stderr.write(`polar up: ${s} again: requeueing held sessions and stopping\n`);
          void sys.gateway.stop("stopped by a second signal").finally(() => sys.stop());
        },
      });
      try {
        if (o.run) await Promise.race([runOnce(sys.natsUrl, o.run, o.out, sys.credentials?.trainer), sys.closed]);
        else {
          process.stdout.write("ready; Ctrl-C stops everything\n");
          const reason = await sys.closed;
          process.stdout.write(`polar up: stopped (${reason})\n`);
        }
      } finally {
        await clearUpState();
        await sys.stop();
        unwatch();
        exitSoon();
      }
    });
}

async function runOnce(natsUrl: string, file: string, out?: string, auth?: NatsAuth): Promise<void> {
  const nc = await connectNats(natsUrl, "polar-cli", auth);
  try {
    const reply = await submitTask(nc, await readTaskFile(file));
    process.stdout.write(`submitted ${reply.task_id}: ${reply.total_sessions} sessions\n`);
    const { status: st, traces } = await followTask(nc, reply.task_id, { out, progress: { out: process.stdout } });
    process.stdout.write(`${formatSummary(st)}\n`);
    if (out) process.stdout.write(`wrote ${traces} traces to ${out}\n`);
    if (st.status !== "completed") process.exitCode = 2;
  } finally {
    await nc.drain();
  }
}
