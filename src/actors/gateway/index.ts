/**
 * The Gateway (node) actor: joins a pool by binding the shared durable pull
 * consumer, runs sessions through its stage pipeline, serves the capturing
 * model proxy, registers itself in `polar_nodes` and heartbeats with stage
 * metrics. Leaving: stop pulling, announce, cancel what is in flight (its
 * messages are redelivered to other gateways as new attempts), drain.
 */
import { registerSecret, secretEnvFrom } from "../../security/redact.ts";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { decode, encode } from "../../protocol/codec.ts";
import { STREAMS, SUBJECTS, idFromToken, nodeKey, type EventKind } from "../../protocol/subjects.ts";
import { errorMessage } from "../../protocol/errors.ts";
import { LoopDelayMonitor } from "../../util/loop-delay.ts";
import { TERMINAL_STATUSES, type GatewayNodeInfo, type NodeHeartbeat, type NodeMetrics, type RuntimeSpec } from "../../protocol/schemas.ts";
import { gatewayMetrics } from "../../metrics/gateway.ts";
import { DEFAULT_INFRA, ensureDispatchConsumer, openInfra, type InfraOptions } from "../../nats/infra.ts";
import { startProxy } from "../../proxy/server.ts";
import type { ProxyOptions } from "../../proxy/types.ts";
import { qwen3Tokenizer } from "../../tokenizer/qwen3.ts";
import { actorHandle, type ActorHandle } from "../lifecycle.ts";
import { CaptureRegistry } from "./capture.ts";
import { SessionBindings } from "./proxy-binding.ts";
import type { GatewayContext, GatewayRegistries } from "./context.ts";
import { Pipeline, type StageLimits } from "./pipeline.ts";
import { reapLeftovers } from "./reap.ts";
import { serveRequests } from "../../nats/messages.ts";
import { createDrainer, DEFAULT_DRAIN_TIMEOUT_MS, serveDrain } from "./drain.ts";
import { toolsDir } from "../../tools/paths.ts";
import { DEFAULT_UPLOAD_ROOTS } from "../../security/upload-roots.ts";
import { InferenceGate } from "../../proxy/gate.ts";
import { readControl } from "../../nats/control-state.ts";
import type { EnginePauseKind } from "./engine-pause.ts";
import { startInferenceControl } from "./inference.ts";
import { startEvaluator, type EvaluatorHandle } from "../evaluator/index.ts";
import { remoteEvaluator } from "./remote-eval.ts";

export interface GatewayDeps {
  nc: NatsConnection;
  log: Logger;
  registries: GatewayRegistries;
}

export interface GatewayOptions {
  nodeId?: string;
  pool?: string;
  /** Stage capacities; `keepAliveMs` (default ack_wait / 3) is how often a held session is kept alive and its lease renewed. */
  limits?: Partial<Omit<StageLimits, "ackWaitMs" | "leaseStaleMs" | "publishRetryMs">>;
  /** How long a finished session's result publish is retried through a NATS outage (default 15 min). */
  publishRetryMs?: number;
  heartbeatIntervalMs?: number;
  proxy: Partial<ProxyOptions> & Pick<ProxyOptions, "upstreams">;
  /** Used when a task names no runtime. */
  defaultRuntime?: Partial<RuntimeSpec>;
  /** Host directory for session files (default: a temporary directory). */
  workRoot?: string;
  /** Pinned harness CLIs, mounted read-only into sandboxes (default: the tools cache when it exists). */
  toolsDir?: string;
  keepSessionDirs?: boolean;
  infra?: InfraOptions;
  /** Host directories tasks may upload from (default: polar's example files only). */
  uploadRoots?: readonly string[];
  /** How long a drain lets held sessions finish before requeueing them (default 300 s). */
  drainTimeoutMs?: number;
  /** Also pause/resume the engines themselves on weight sync (default none). */
  enginePause?: EnginePauseKind;
  /** The evaluator actor the gateway hosts (node id `<node id>-ev`); `false`: none. Default: 2 at once. */
  evaluator?: false | { maxConcurrency?: number };
  /**
   * Send remote-capable evaluations with `refresh_runtime` to the pool's evaluator actors (default);
   * `false`: evaluate them here, in a fresh runtime warmed up while the agent runs.
   */
  remoteEvaluation?: boolean;
  /**
   * Names of variables of this process's environment handed to every agent
   * (`security.secret_env_names`): their values never travel through NATS and
   * are redacted from logs, step logs and results.
   */
  secretEnvNames?: readonly string[];
}

export interface GatewayHandle extends ActorHandle {
  readonly nodeId: string;
  readonly proxyUrl: string;
  metrics(): NodeMetrics;
  /** Prometheus text of this gateway (also served at the proxy's `GET /metrics`). */
  prometheus(): Promise<string>;
  readonly pipeline: Pipeline;
  /**
   * Pull nothing more, let held sessions finish and publish within the
   * timeout, then leave (stop). A `stop()` meanwhile requeues what is held.
   */
  drain(timeoutMs?: number): Promise<void>;
  /** The proxy's inference gate (paused or not, policy version, held calls). */
  readonly gate: InferenceGate;
  /** The hosted evaluator actor, unless disabled. */
  readonly evaluator?: EvaluatorHandle;
}

/** The secret env values, registered for redaction; a name that is not set is said once, not invented. */
function secretEnv(names: readonly string[], log: Logger): Record<string, string> {
  const { values, missing } = secretEnvFrom(names);
  registerSecret(...Object.values(values));
  if (missing.length) log.warn({ missing }, "secret env variables named in the config are not set; agents run without them");
  return values;
}

function cancelReason(data: Uint8Array): string {
  try {
    const r = (decode(data) as { reason?: unknown } | undefined)?.reason;
    return typeof r === "string" && r ? r : "session cancelled";
  } catch {
    return "session cancelled";
  }
}

export async function startGateway(deps: GatewayDeps, opts: GatewayOptions): Promise<GatewayHandle> {
  const nodeId = opts.nodeId ?? `gw-${randomBytes(4).toString("hex")}`;
  const pool = opts.pool ?? "default";
  const log = deps.log.child({ actor: "gateway", node_id: nodeId });
  const infraOpts = { ...DEFAULT_INFRA, ...opts.infra };
  const infra = await openInfra(deps.nc, infraOpts);
  const durable = await ensureDispatchConsumer(infra.jsm, pool, infraOpts);
  await reapLeftovers(nodeId, log);
  const workRoot = opts.workRoot ?? join(tmpdir(), `polar-${nodeId}`);
  await mkdir(workRoot, { recursive: true });
  const capture = new CaptureRegistry();
  const bindings = new SessionBindings({ socketDir: join(workRoot, "sockets"), mode: opts.proxy.bindCredentials });
  // The pipeline and proxy exist only below; the metrics read them when scraped.
  let pipelineRef: Pipeline | undefined;
  let proxyRef: Awaited<ReturnType<typeof startProxy>> | undefined;
  let limitsRef: StageLimits | undefined;
  let gateRef: InferenceGate | undefined;
  const metrics = gatewayMetrics(nodeId, {
    policyVersion: () => gateRef?.policyVersion ?? 0,
    stages: () => pipelineRef!.metrics(),
    capacity: () => ({
      init: limitsRef?.maxInitWorkers ?? 0,
      ready: limitsRef?.readyCapacity ?? 0,
      run: limitsRef?.maxRunWorkers ?? 0,
      postrun: limitsRef?.maxPostrunWorkers ?? 0,
    }),
    proxy: () => proxyRef!.stats(),
  });
  // A gateway that joins while inference is paused starts paused, at the current policy version.
  const { state: control } = await readControl(infra.control);
  const gate = new InferenceGate({ paused: control.paused, policyVersion: control.policy_version });
  gateRef = gate;
  const proxy = await startProxy(
    { sessions: capture, sink: capture, log, observer: metrics.observer, metrics: metrics.registry, gate, peers: bindings },
    {
      host: "127.0.0.1",
      port: 0,
      flavor: "vllm",
      modelServed: "Qwen/Qwen3-8B",
      maxBodyBytes: 32 * 1024 * 1024,
      upstreamTimeoutMs: 900_000,
      socketPath: join(workRoot, "proxy.sock"),
      ...opts.proxy,
    },
  );
  proxyRef = proxy;
  bindings.attach(proxy);
  const emit = (kind: EventKind, body: unknown) => {
    if (kind === "session.state_changed") {
      const status = (body as { status?: string }).status;
      if (status && TERMINAL_STATUSES.has(status as never)) metrics.sessionFinished(status);
    }
    deps.nc.publish(SUBJECTS.event(kind), encode(body));
  };
  let tokenizer: ReturnType<typeof qwen3Tokenizer> | undefined;
  const g: GatewayContext = {
    nodeId,
    log,
    registries: deps.registries,
    capture,
    proxyEndpoint: { url: proxy.url, socketPath: proxy.socketPath },
    bindings,
    defaultRuntime: { backend: "local", ...opts.defaultRuntime },
    workRoot,
    toolsDir: opts.toolsDir ?? (existsSync(toolsDir()) ? toolsDir() : undefined),
    keepSessionDirs: opts.keepSessionDirs ?? false,
    uploadRoots: opts.uploadRoots ?? DEFAULT_UPLOAD_ROOTS,
    secretEnv: secretEnv(opts.secretEnvNames ?? [], log),
    remoteEval: opts.remoteEvaluation === false ? undefined : remoteEvaluator(infra, pool, log),
    builderDeps: () => ({ tokenizer: (tokenizer ??= qwen3Tokenizer()) }),
    emit,
    policyVersion: () => gate.policyVersion,
  };
  const inference = startInferenceControl({
    nc: deps.nc,
    control: infra.control,
    gate,
    nodeId,
    log,
    upstreams: opts.proxy.upstreams,
    enginePause: opts.enginePause ?? "none",
  });
  const maxRun = opts.limits?.maxRunWorkers ?? 2;
  const maxPost = opts.limits?.maxPostrunWorkers ?? 4;
  const limits: StageLimits = {
    maxInitWorkers: opts.limits?.maxInitWorkers ?? 4,
    maxRunWorkers: maxRun,
    maxPostrunWorkers: maxPost,
    initQueueCapacity: opts.limits?.initQueueCapacity ?? 0,
    readyCapacity: opts.limits?.readyCapacity ?? maxRun,
    postrunQueueCapacity: opts.limits?.postrunQueueCapacity ?? maxPost,
    keepAliveMs: opts.limits?.keepAliveMs ?? Math.max(200, Math.floor(infraOpts.dispatchAckWaitMs / 3)),
    ackWaitMs: infraOpts.dispatchAckWaitMs,
    leaseStaleMs: 0,
    publishRetryMs: opts.publishRetryMs ?? 15 * 60_000,
    sharedInitRun: opts.limits?.sharedInitRun ?? false,
  };
  // A live holder renews at every keep-alive: three missed renewals and the lease may be taken over.
  limits.leaseStaleMs = Math.max(2000, 3 * limits.keepAliveMs);
  limitsRef = limits;
  const pipeline = new Pipeline(g, infra, limits, log);

  pipelineRef = pipeline;
  const loopDelay = new LoopDelayMonitor();
  const nodeMetrics = (): NodeMetrics => {
    const p = proxy.stats();
    const lag = loopDelay.last;
    return {
      ...pipeline.metrics(),
      upstream_inflight: p.upstream_inflight,
      upstream_busy_ms: p.upstream_busy_ms,
      sessions_finished: metrics.finishedTotal(),
      loop_delay_p99_ms: lag.p99_ms,
      loop_delay_max_ms: lag.max_ms,
    };
  };

  const cancelSub = deps.nc.subscribe(SUBJECTS.sessionCancelAll, {
    callback: (err, msg) => {
      if (err) return log.error({ err }, "cancel subscription failed");
      let sid: string;
      try {
        sid = idFromToken("session_id", msg.subject.slice(msg.subject.lastIndexOf(".") + 1));
      } catch (e) {
        return log.warn({ err: errorMessage(e), subject: msg.subject }, "cancel for a subject that encodes no session id");
      }
      const reason = cancelReason(msg.data);
      if (pipeline.cancel(sid, reason)) log.info({ session_id: sid, reason }, "session cancelled");
    },
  });

  const heartbeatMs = opts.heartbeatIntervalMs ?? 5000;
  const info = (): GatewayNodeInfo => ({
    node_id: nodeId,
    gateway_url: proxy.url,
    max_init_workers: limits.maxInitWorkers,
    max_run_workers: limits.maxRunWorkers,
    max_postrun_workers: limits.maxPostrunWorkers,
    ready_capacity: limits.readyCapacity,
    heartbeat_interval_seconds: heartbeatMs / 1000,
    pool,
    started_at: startedAt,
    metrics: nodeMetrics(),
    healthy: true,
    draining: stopping,
    last_heartbeat: new Date().toISOString(),
  });
  const startedAt = new Date().toISOString();
  let stopping = false;
  let registering = false;
  const beat = async () => {
    try {
      // Every tick beats, even while the last registry write hangs (a NATS outage): liveness reads the beats.
      const hb: NodeHeartbeat = { node_id: nodeId, metrics: nodeMetrics(), sent_at: new Date().toISOString(), draining: stopping, interval_ms: heartbeatMs };
      deps.nc.publish(SUBJECTS.heartbeat(nodeId), encode(hb));
    } catch (err) {
      log.warn({ err: errorMessage(err) }, "heartbeat failed");
    }
    if (registering) return; // skip the registry write while the last one runs
    registering = true;
    try {
      await infra.nodes.put(nodeKey(nodeId), encode(info()));
    } catch (err) {
      log.warn({ err: errorMessage(err) }, "node registration failed");
    } finally {
      registering = false;
    }
  };
  await beat();
  emit("node.joined", { node_id: nodeId, pool });
  const hbTimer = setInterval(() => void beat(), heartbeatMs * (0.9 + Math.random() * 0.2));
  hbTimer.unref();

  // After an outage every node was silent: the pipeline counts silences from the reconnection.
  void (async () => {
    for await (const st of deps.nc.status()) if (st.type === "reconnect") pipeline.reconnected();
  })().catch((err) => log.debug({ err: errorMessage(err) }, "NATS status stream ended"));

  // A gateway that lost NATS for good cannot ack: its sessions will run elsewhere, so stop them here.
  void deps.nc.closed().then(() => pipeline.cancelAll("gateway lost its NATS connection", true));

  const evaluator =
    opts.evaluator === false
      ? undefined
      : await startEvaluator(deps, {
          nodeId: `${nodeId}-ev`,
          pool,
          hostedBy: nodeId,
          maxConcurrency: opts.evaluator?.maxConcurrency,
          heartbeatIntervalMs: heartbeatMs,
          workRoot: join(workRoot, "evaluator"),
          toolsDir: g.toolsDir,
          infra: infraOpts,
        });

  const abort = new AbortController();
  const stopPulling = () => {
    stopping = true;
    abort.abort(new Error("gateway stopping"));
  };
  const drainer = createDrainer({
    nodeId,
    log,
    defaultTimeoutMs: opts.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS,
    held: () => pipeline.size,
    stopPulling: () => {
      stopPulling();
      void beat(); // announce `draining` now, not at the next tick
    },
    settle: () => pipeline.settle(),
    leave: (reason) => handle.stop(reason),
  });
  const drainSub = serveDrain(deps.nc, drainer, nodeId, log);
  // Alive while this answers: the node monitor asks before it takes a silent node for dead.
  const pingSub = serveRequests(deps.nc, SUBJECTS.nodePing(nodeId), async () => ({ node_id: nodeId, ok: true }), log);
  const consumer = await infra.js.consumers.get(STREAMS.sessions, durable);
  const pulling = pipeline.pullLoop(consumer, abort.signal);
  log.info({ proxy: proxy.url, pool, limits }, "gateway started");

  const handle = actorHandle(
    { nodeId, proxyUrl: proxy.url, metrics: nodeMetrics, prometheus: () => metrics.registry.metrics(), pipeline, drain: (ms?: number) => drainer.drain(ms), gate, evaluator },
    [
      stopPulling,
      () => pulling,
      // Its evaluations go back to the queue for the pool's other evaluators.
      () => evaluator?.stop(),
      () => beat(),
      () => pipeline.cancelAll("gateway stopping", true),
      () => pipeline.settle(),
      () => clearInterval(hbTimer),
      () => loopDelay.stop(),
      () => cancelSub.drain(),
      () => drainSub.drain(),
      () => pingSub.drain(),
      () => inference.stop(),
      () => infra.nodes.delete(nodeKey(nodeId)),
      () => emit("node.left", { node_id: nodeId }),
      () => proxy.stop(),
      () => (opts.workRoot ? undefined : rm(workRoot, { recursive: true, force: true })),
    ],
    (err) => log.warn({ err }, "gateway stop step failed"),
  );
  return handle;
}
