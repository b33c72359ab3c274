import type { Command } from "commander";
import { startGateway } from "../../actors/gateway/index.ts";
import { gatewayOptionsFrom, loadConfig } from "../../app/config.ts";
import { createRegistries } from "../../app/registries.ts";
import { connectNats } from "../../nats/infra.ts";
import { PolarError } from "../../protocol/errors.ts";
import { createLogger } from "../../util/log.ts";
import { resolveNatsUrl, untilSignal } from "../common.ts";

export function register(program: Command): void {
  program
    .command("gateway")
    .description("run one Gateway (node) actor: pulls sessions, runs harnesses in runtimes, serves the capturing proxy")
    .option("-c, --config <file>", "config file (JSON, see config/polar.example.json)")
    .option("--nats <url>", "NATS server URL (default: POLAR_NATS_URL or the running `polar up`)")
    .option("--node-id <id>", "node id (default: random)")
    .option("--pool <name>", "dispatch pool")
    .option("--upstream <url...>", "inference server base URL(s), e.g. http://127.0.0.1:8000")
    .option("--flavor <vllm|sglang>", "inference server flavor")
    .option("--proxy-port <port>", "model proxy port (0: any free port)", Number)
    .option("--max-run <n>", "RUNNING stage workers", Number)
    .action(async (o: { config?: string; nats?: string; nodeId?: string; pool?: string; upstream?: string[]; flavor?: "vllm" | "sglang"; proxyPort?: number; maxRun?: number }) => {
      const config = await loadConfig(o.config);
      const opts = gatewayOptionsFrom(config);
      if (o.upstream) opts.proxy.upstreams = o.upstream;
      if (!opts.proxy.upstreams.length) throw new PolarError("validation", "no inference upstream: pass --upstream URL or set gateway.proxy.upstreams in the config");
      if (o.flavor) opts.proxy.flavor = o.flavor;
      if (o.proxyPort !== undefined) opts.proxy.port = o.proxyPort;
      if (o.maxRun) opts.limits.maxRunWorkers = o.maxRun;
      const log = createLogger();
      const nc = await connectNats(await resolveNatsUrl(o.nats ?? config.nats_url), `polar-gateway-${o.nodeId ?? ""}`);
      const gw = await startGateway({ nc, log, registries: createRegistries() }, { ...opts, nodeId: o.nodeId ?? opts.nodeId, pool: o.pool ?? opts.pool });
      process.stdout.write(`gateway ${gw.nodeId}: proxy ${gw.proxyUrl}\n`);
      await untilSignal();
      await gw.stop();
      await nc.drain();
    });
}
