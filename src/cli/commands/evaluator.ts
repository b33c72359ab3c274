import type { Command } from "commander";
import { startEvaluator } from "../../actors/evaluator/index.ts";
import { evaluatorOptionsFrom, loadConfig } from "../../app/config.ts";
import { createRegistries } from "../../app/registries.ts";
import { connectNats } from "../../nats/infra.ts";
import { createLogger } from "../../util/log.ts";
import { resolveNatsAuth, resolveNatsUrl, untilSignal, withCreds } from "../common.ts";

export function register(program: Command): void {
  program
    .command("evaluator")
    .description("run one Evaluator actor: takes evaluation requests of a pool from the POLAR_EVALS work queue and evaluates them in fresh runtimes")
    .option("-c, --config <file>", "config file (JSON; its `evaluator` and `infra` sections)")
    .option("--nats <url>", "NATS server URL (default: POLAR_NATS_URL or the running `polar up`)")
    .option("--creds <file>", "NATS .creds file (user JWT and NKey seed, as nsc writes it) to authenticate with")
    .option("--node-id <id>", "node id (default: random)")
    .option("--pool <name>", "the pool whose evaluations it takes")
    .option("--max-concurrency <n>", "evaluations at once", Number)
    .action(async (o: { config?: string; nats?: string; creds?: string; nodeId?: string; pool?: string; maxConcurrency?: number }) => {
      const config = await loadConfig(o.config);
      const opts = evaluatorOptionsFrom(config);
      const log = createLogger();
      const url = await resolveNatsUrl(o.nats ?? config.nats_url);
      const nc = await connectNats(url, `polar-evaluator-${o.nodeId ?? ""}`, withCreds(config.security.nats_auth ?? (await resolveNatsAuth(url, "evaluator")), o.creds));
      const ev = await startEvaluator(
        { nc, log, registries: createRegistries() },
        { ...opts, nodeId: o.nodeId ?? opts.nodeId, pool: o.pool ?? opts.pool, maxConcurrency: o.maxConcurrency ?? opts.maxConcurrency },
      );
      process.stdout.write(`evaluator ${ev.nodeId}: pool ${o.pool ?? opts.pool}\n`);
      await untilSignal();
      await ev.stop();
      await nc.drain();
    });
}
