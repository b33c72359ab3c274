/**
 * The one-machine default: an embedded nats-server, the sim, the supervisor
 * and one gateway in one process. Used by `polar up` and by the tests.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { startGateway, type GatewayHandle, type GatewayOptions } from "../actors/gateway/index.ts";
import { startSupervisor, type SupervisorHandle, type SupervisorOptions } from "../actors/supervisor/index.ts";
import { startNatsServer, type NatsServerHandle } from "../nats/launcher.ts";
import { connectNats } from "../nats/infra.ts";
import { startSim, type SimHandle } from "../sim/server.ts";
import { createRegistries, specChecker } from "./registries.ts";

export interface UpOptions {
  /** Use this NATS server instead of starting one. */
  natsUrl?: string;
  /** Start the sim (default true); when false, `upstreams` must be given. */
  sim?: boolean | Parameters<typeof startSim>[0];
  upstreams?: string[];
  supervisor?: SupervisorOptions;
  gateway?: Partial<GatewayOptions>;
  log: Logger;
}

export interface UpHandle {
  nats?: NatsServerHandle;
  natsUrl: string;
  sim?: SimHandle;
  supervisor: SupervisorHandle;
  gateway: GatewayHandle;
  connections: NatsConnection[];
  stop(): Promise<void>;
}

export async function up(opts: UpOptions): Promise<UpHandle> {
  const stack: Array<() => Promise<unknown>> = [];
  const stop = async () => {
    for (const step of stack.reverse().splice(0)) await step().catch((err) => opts.log.warn({ err }, "stop step failed"));
  };
  try {
    const nats = opts.natsUrl ? undefined : await startNatsServer();
    if (nats) stack.push(() => nats.stop());
    const natsUrl = opts.natsUrl ?? nats!.url;
    const sim = opts.sim === false ? undefined : await startSim({ log: opts.log, ...(typeof opts.sim === "object" ? opts.sim : {}) });
    if (sim) stack.push(() => sim.stop());
    const registries = createRegistries();
    const supNc = await connectNats(natsUrl, "polar-supervisor");
    stack.push(() => supNc.drain());
    const supervisor = await startSupervisor({ nc: supNc, log: opts.log, check: specChecker(registries) }, opts.supervisor);
    stack.push(() => supervisor.stop());
    const gwNc = await connectNats(natsUrl, "polar-gateway");
    stack.push(() => gwNc.drain().catch(() => {}));
    const configured = opts.upstreams?.length ? opts.upstreams : opts.gateway?.proxy?.upstreams;
    const upstreams = configured?.length ? configured : sim ? [sim.url] : [];
    const gateway = await startGateway(
      { nc: gwNc, log: opts.log, registries },
      { ...opts.gateway, proxy: { ...opts.gateway?.proxy, upstreams } },
    );
    stack.push(() => gateway.stop());
    return { nats, natsUrl, sim, supervisor, gateway, connections: [supNc, gwNc], stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
