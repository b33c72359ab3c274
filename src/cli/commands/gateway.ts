import type { Command } from "commander";
import { startGateway } from "../../actors/gateway/index.ts";
import { gatewayOptionsFrom, loadConfig } from "../../app/config.ts";
import { createRegistries } from "../../app/registries.ts";
import { closeNats, connectNats } from "../../nats/infra.ts";
import { PolarError } from "../../protocol/errors.ts";
import { createLogger } from "../../util/log.ts";
import { exitSoon, resolveNatsAuth, resolveNatsUrl, watchSignals, withCreds } from "../common.ts";

export function register(program: Command): void {
  program
    .command("gateway")
    .description("run one Gateway (node) actor: pulls sessions, runs harnesses in runtimes, serves the capturing proxy")
    .option("-c, --config <file>", "config file (JSON, see config/polar.example.json)")
    .option("--nats <urls>", "NATS server URL(s), comma-separated for a cluster (default: POLAR_NATS_URL or the running `polar up`)")
    .option("--creds <file>", "NATS .creds file (user JWT and NKey seed, as nsc writes it) to authenticate with")
    .option("--node-id <id>", "node id (default: random)")
    .option("--pool <name>", "dispatch pool")
    .option("--upstream <url...>", "inference server base URL(s), e.g. http://127.0.0.1:8000")
    .option("--flavor <vllm|sglang>", "inference server flavor")
    .option("--proxy-port <port>", "model proxy port (0: any free port)", Number)
    .option("--max-run <n>", "RUNNING stage workers", Number)
    .option("--drain-timeout <seconds>", "on SIGTERM/SIGINT or a drain request, how long held sessions may finish before they are requeued (default 300)", Number)
    .option("--no-evaluator", "host no evaluator actor (remote evaluations then run on `polar evaluator` processes)")
    .option("--max-evals <n>", "evaluations the hosted evaluator runs at once", Number)
    .action(async (o: { config?: string; nats?: string; creds?: string; nodeId?: string; pool?: string; upstream?: string[]; flavor?: "vllm" | "sglang"; proxyPort?: number; maxRun?: number; drainTimeout?: number; evaluator: boolean; maxEvals?: number }) => {
      const config = await loadConfig(o.config);
      const opts = gatewayOptionsFrom(config);
      if (o.upstream) opts.proxy.upstreams = o.upstream;
      if (!opts.proxy.upstreams.length) throw new PolarError("validation", "no inference upstream: pass --upstream URL or set gateway.proxy.upstreams in the config");
      if (o.flavor) opts.proxy.flavor = o.flavor;
      if (o.proxyPort !== undefined) opts.proxy.port = o.proxyPort;
      if (o.maxRun) opts.limits.maxRunWorkers = o.maxRun;
      if (o.drainTimeout !== undefined) {
        if (!(o.drainTimeout > 0 && o.drainTimeout <= 7 * 24 * 3600)) throw new PolarError("validation", "--drain-timeout must be a number of seconds in (0, 604800]");
        opts.drainTimeoutMs = o.drainTimeout * 1000;
      }
      const log = createLogger();
      const url = await resolveNatsUrl(o.nats ?? config.nats_url);
      const nc = await connectNats(url, `polar-gateway-${o.nodeId ?? ""}`, withCreds(config.security.nats_auth ?? (await resolveNatsAuth(url, "gateway")), o.creds));
      const evaluator = !o.evaluator ? false : o.maxEvals ? { maxConcurrency: o.maxEvals } : opts.evaluator;
      const gw = await startGateway({ nc, log, registries: createRegistries() }, { ...opts, evaluator, nodeId: o.nodeId ?? opts.nodeId, pool: o.pool ?? opts.pool });
      process.stdout.write(`gateway ${gw.nodeId}: proxy ${gw.proxyUrl}${gw.evaluator ? `, evaluator ${gw.evaluator.nodeId}` : ""}
`);
      // SIGTERM = drain (a drain request over NATS/HTTP does the same); a second signal requeues what is held and stops.
      const unwatch = watchSignals({
        first: (s) => {
          process.stderr.write(`gateway ${gw.nodeId}: ${s}: draining ${gw.pipeline.size} held sessions (up to ${opts.drainTimeoutMs / 1000} s); send it again to requeue held sessions and stop now\n`);
          void gw.drain();
        },
        second: (s) => {
          process.stderr.write(`gateway ${gw.nodeId}: ${s} again: requeueing held sessions and stopping\n`);
          void gw.stop("stopped by a second signal");
        },
      });
      const reason = await gw.closed;
      process.stdout.write(`gateway ${gw.nodeId}: left (${reason})\n`);
      await closeNats(nc);
      unwatch();
      exitSoon();
    });
}
