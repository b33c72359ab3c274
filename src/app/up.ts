/**
 * The one-machine default: an embedded nats-server, the sim, the supervisor
 * and one gateway in one process. Used by `polar up` and by the tests.
 *
 * Stopping is bounded whatever order the parts die in: every teardown step
 * has a deadline, and when the embedded nats-server exits first (a service
 * manager signalling the whole process group) the connections are closed at
 * once, so nothing waits on a server that is gone, and the handle stops itself.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { startGateway, type GatewayHandle, type GatewayOptions } from "../actors/gateway/index.ts";
import { startSupervisor, type SupervisorHandle, type SupervisorOptions } from "../actors/supervisor/index.ts";
import { startNatsServer, type NatsServerHandle } from "../nats/launcher.ts";
import { closeNats, connectNats } from "../nats/infra.ts";
import { startSim, type SimHandle } from "../sim/server.ts";
import { createRegistries, specChecker } from "./registries.ts";
import { registerSecret } from "../security/redact.ts";
import { generateRoleUsers, serverUsersFrom, type NatsAuth } from "../security/nats-auth.ts";
import type { Role } from "../security/nats-roles.ts";

export interface UpOptions {
  /** Use this NATS server instead of starting one. */
  natsUrl?: string;
  /** Start the sim (default true); when false, `upstreams` must be given. */
  sim?: boolean | Parameters<typeof startSim>[0];
  upstreams?: string[];
  supervisor?: SupervisorOptions;
  gateway?: Partial<GatewayOptions>;
  /**
   * The embedded server requires credentials: a user with its role's subject
   * permissions for each part (default true). With `natsUrl`, every part uses
   * the credentials of the environment (POLAR_NATS_*).
   */
  auth?: boolean;
  log: Logger;
  /** Deadline of each teardown step (default 10 s). */
  stopStepTimeoutMs?: number;
}

export interface UpHandle {
  nats?: NatsServerHandle;
  natsUrl: string;
  sim?: SimHandle;
  supervisor: SupervisorHandle;
  gateway: GatewayHandle;
  connections: NatsConnection[];
  /** Drains the gateway (finish held sessions within the timeout, publish, leave); then `stop()` ends the rest. */
  drain(timeoutMs?: number): Promise<void>;
  /** Per-role credentials of the embedded server (undefined without one, or with auth off). */
  credentials?: Record<Role, NatsAuth>;
  stop(): Promise<void>;
  /** Resolves once stopped: by `stop()`, or by itself when the embedded nats-server exited. */
  readonly closed: Promise<string>;
}

export async function up(opts: UpOptions): Promise<UpHandle> {
  const stack: Array<{ name: string; run: () => Promise<unknown> }> = [];
  const connections: NatsConnection[] = [];
  const stepMs = opts.stopStepTimeoutMs ?? 10_000;
  let resolveClosed!: (reason: string) => void;
  const closed = new Promise<string>((r) => (resolveClosed = r));
  let stopping: Promise<void> | undefined;
  const stop = (reason = "stopped") => {
    stopping ??= (async () => {
      for (const step of stack.reverse().splice(0)) {
        await withDeadline(step.run(), stepMs, step.name).catch((err) => opts.log.warn({ err, step: step.name }, "stop step failed"));
      }
      resolveClosed(reason);
    })();
    return stopping;
  };
  let natsGone = false;
  try {
    const credentials = opts.natsUrl || opts.auth === false ? undefined : generateRoleUsers();
    if (credentials) registerSecret(...Object.values(credentials).map((c) => c.password));
    const nats = opts.natsUrl ? undefined : await startNatsServer({ auth: credentials && serverUsersFrom(credentials) });
    if (nats) {
      stack.push({ name: "nats-server", run: () => nats.stop() });
      void nats.closed.then((code) => {
        natsGone = true;
        // Nothing can reach JetStream any more: fail every pending call now instead of at its timeout.
        for (const nc of connections) void nc.close().catch((err) => opts.log.debug({ err }, "close after server exit"));
        if (stopping) return;
        opts.log.error({ code }, "the embedded nats-server exited: stopping everything");
        void stop("nats-server exited");
      });
    }
    const natsUrl = opts.natsUrl ?? nats!.url;
    const sim = opts.sim === false ? undefined : await startSim({ log: opts.log, ...(typeof opts.sim === "object" ? opts.sim : {}) });
    if (sim) stack.push({ name: "sim", run: () => sim.stop() });
    const registries = createRegistries();
    const supNc = await connectNats(natsUrl, "polar-supervisor", credentials?.supervisor);
    connections.push(supNc);
    stack.push({ name: "supervisor connection", run: () => closeNats(supNc) });
    const supervisor = await startSupervisor({ nc: supNc, log: opts.log, check: specChecker(registries) }, opts.supervisor);
    stack.push({ name: "supervisor", run: () => supervisor.stop() });
    const gwNc = await connectNats(natsUrl, "polar-gateway", credentials?.gateway);
    connections.push(gwNc);
    stack.push({ name: "gateway connection", run: () => closeNats(gwNc) });
    const configured = opts.upstreams?.length ? opts.upstreams : opts.gateway?.proxy?.upstreams;
    const upstreams = configured?.length ? configured : sim ? [sim.url] : [];
    const gateway = await startGateway(
      { nc: gwNc, log: opts.log, registries },
      { ...opts.gateway, proxy: { ...opts.gateway?.proxy, upstreams } },
    );
    stack.push({ name: "gateway", run: () => gateway.stop() });
    const drain = async (timeoutMs?: number) => {
      if (natsGone || stopping) return; // nothing could be published: stop() requeues nothing and ends
      await gateway.drain(timeoutMs);
    };
    return { nats, natsUrl, sim, supervisor, gateway, connections, credentials, drain, stop: () => stop(), closed };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Resolves or rejects with the promise, or rejects once `ms` passed (the step is then abandoned). */
function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not stop within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
