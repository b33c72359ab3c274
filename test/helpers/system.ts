/**
 * The whole system for integration tests: a real nats-server (one per test
 * file), the sim behind a recording hop, a supervisor and gateways, each
 * with its own NATS connection so a test can stop or cut any of them.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { startGateway, type GatewayHandle, type GatewayOptions } from "../../src/actors/gateway/index.ts";
import { startSupervisor, type SupervisorHandle, type SupervisorOptions } from "../../src/actors/supervisor/index.ts";
import { createRegistries, specChecker } from "../../src/app/registries.ts";
import { connectNats, type InfraOptions } from "../../src/nats/infra.ts";
import { startNatsServer, type NatsServerHandle } from "../../src/nats/launcher.ts";
import { startSim, type SimHandle } from "../../src/sim/server.ts";
import { silentLogger, createLogger } from "../../src/util/log.ts";
import { startRecordingUpstream, type RecordingUpstream } from "./recording-upstream.ts";

export const TEST_INFRA: InfraOptions = { dispatchAckWaitMs: 2500, maxDeliver: 5, nodeTtlMs: 10_000, evalAckWaitMs: 2500 };

const log = process.env.POLAR_TEST_LOG ? createLogger({ level: process.env.POLAR_TEST_LOG }) : silentLogger();

export interface TestSystem {
  nats: NatsServerHandle;
  sim: SimHandle;
  upstream: RecordingUpstream;
  client: NatsConnection;
  startSupervisor(opts?: SupervisorOptions): Promise<SupervisorHandle & { nc: NatsConnection }>;
  startGateway(opts?: Partial<GatewayOptions>): Promise<GatewayHandle & { nc: NatsConnection }>;
  /** Stops every supervisor (or gateway) started so far. */
  stopSupervisors(): Promise<void>;
  stopGateways(): Promise<void>;
  stop(): Promise<void>;
}

export async function startTestSystem(
  simOpts: Parameters<typeof startSim>[0] = {},
  natsOpts: Parameters<typeof startNatsServer>[0] = {},
): Promise<TestSystem> {
  const nats = await startNatsServer(natsOpts);
  const sim = await startSim({ log, ...simOpts });
  const upstream = await startRecordingUpstream(sim.url);
  const client = await connectNats(nats.url, "test-client");
  const registries = createRegistries();
  const stops: Array<{ kind: string; stop: () => Promise<unknown> }> = [];
  const stopKind = async (kind: string) => {
    for (const s of stops.filter((x) => x.kind === kind).reverse()) {
      stops.splice(stops.indexOf(s), 1);
      await s.stop().catch(() => {});
    }
  };
  return {
    nats,
    sim,
    upstream,
    client,
    async startSupervisor(opts = {}) {
      const nc = await connectNats(nats.url, "test-supervisor");
      const s = await startSupervisor(
        { nc, log, check: specChecker(registries) },
        { http: { host: "127.0.0.1", port: 0 }, infra: TEST_INFRA, sweepIntervalMs: 1000, ...opts },
      );
      stops.push({
        kind: "supervisor",
        stop: async () => {
          await s.stop();
          await nc.close();
        },
      });
      return Object.assign(s, { nc });
    },
    async startGateway(opts = {}) {
      const nc = await connectNats(nats.url, "test-gateway");
      const g = await startGateway(
        { nc, log, registries },
        { heartbeatIntervalMs: 500, infra: TEST_INFRA, ...opts, proxy: { upstreams: [upstream.url], ...opts.proxy } },
      );
      stops.push({
        kind: "gateway",
        stop: async () => {
          await g.stop();
          await nc.close().catch(() => {});
        },
      });
      return Object.assign(g, { nc });
    },
    stopSupervisors: () => stopKind("supervisor"),
    stopGateways: () => stopKind("gateway"),
    async stop() {
      await stopKind("gateway");
      await stopKind("supervisor");
      await client.close().catch(() => {});
      await upstream.stop();
      await sim.stop();
      await nats.stop();
    },
  };
}
