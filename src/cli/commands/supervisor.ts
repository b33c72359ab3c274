import type { Command } from "commander";
import { startSupervisor } from "../../actors/supervisor/index.ts";
import { infraOptionsFrom, loadConfig, supervisorSecurityFrom } from "../../app/config.ts";
import { createRegistries, specChecker } from "../../app/registries.ts";
import { closeNats, connectNats } from "../../nats/infra.ts";
import { createLogger } from "../../util/log.ts";
import { exitSoon, resolveNatsAuth, resolveNatsUrl, untilSignal, withCreds } from "../common.ts";

export function register(program: Command): void {
  program
    .command("supervisor")
    .description("run the Supervisor actor: task API over NATS and HTTP, dispatch, durable task state, results and traces")
    .option("-c, --config <file>", "config file (JSON, see config/polar.example.json)")
    .option("--nats <urls>", "NATS server URL(s), comma-separated for a cluster (default: POLAR_NATS_URL or the running `polar up`)")
    .option("--creds <file>", "NATS .creds file (user JWT and NKey seed, as nsc writes it) to authenticate with")
    .option("--http-port <port>", "HTTP API port (0: any free port)", Number)
    .option("--http-host <host>", "HTTP API host")
    .action(async (o: { config?: string; nats?: string; creds?: string; httpPort?: number; httpHost?: string }) => {
      const config = await loadConfig(o.config);
      const log = createLogger();
      const url = await resolveNatsUrl(o.nats ?? config.nats_url);
      const nc = await connectNats(url, "polar-supervisor", withCreds(config.security.nats_auth ?? (await resolveNatsAuth(url, "supervisor")), o.creds));
      const sup = await startSupervisor(
        { nc, log, check: specChecker(createRegistries()) },
        {
          http: { host: o.httpHost ?? config.supervisor.http_host, port: o.httpPort ?? config.supervisor.http_port },
          infra: infraOptionsFrom(config),
          resultGraceMs: config.supervisor.result_grace_ms,
          ...supervisorSecurityFrom(config),
        },
      );
      process.stdout.write(`supervisor: API ${sup.httpUrl}\n`);
      await untilSignal();
      // A second signal meanwhile ends the process (default handler): the supervisor holds no work.
      await sup.stop();
      await closeNats(nc);
      exitSoon();
    });
}
