/**
 * The Evaluator actor: evaluates sessions whose evaluator needs no live
 * agent runtime, from the pool's `POLAR_EVALS` work queue. Any number of
 * evaluators share one durable pull consumer (like the gateways' dispatch);
 * each pulls only when it has a free slot, keeps the request in progress
 * (`working()`) while it evaluates, and acks it only after its EvalReply is
 * durably published — an evaluator that dies leaves the request to be
 * redelivered to another. It registers in `polar_nodes` (kind `evaluator`)
 * and heartbeats with its metrics. Gateways host one unless told not to.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import type { Consumer, JsMsg } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { publishDurable, readDurable } from "../../nats/messages.ts";
import { DEFAULT_INFRA, ensureEvaluatorConsumer, openInfra, type Infra, type InfraOptions } from "../../nats/infra.ts";
import { encode, validate } from "../../protocol/codec.ts";
import { errorMessage, PolarError } from "../../protocol/errors.ts";
import { EvalRequest, EvaluatorMetrics, type EvalReply, type EvaluatorNodeInfo } from "../../protocol/schemas.ts";
import { STREAMS, SUBJECTS, nodeKey } from "../../protocol/subjects.ts";
import { toolsDir } from "../../tools/paths.ts";
import { Semaphore, sleep } from "../../util/abort.ts";
import { actorHandle, type ActorHandle } from "../lifecycle.ts";
import { reapLeftovers } from "../gateway/reap.ts";
import type { GatewayRegistries } from "../gateway/context.ts";
import { handleEvalRequest, type HandleContext } from "./handle.ts";

export interface EvaluatorDeps {
  nc: NatsConnection;
  log: Logger;
  registries: GatewayRegistries;
}

export interface EvaluatorOptions {
  nodeId?: string;
  pool?: string;
  /** Evaluations run at once (each may start a runtime). */
  maxConcurrency?: number;
  heartbeatIntervalMs?: number;
  /** Host directory for evaluation files (default: a temporary directory). */
  workRoot?: string;
  toolsDir?: string;
  /** The gateway this evaluator runs inside, if any. */
  hostedBy?: string;
  infra?: InfraOptions;
  now?: () => number;
}

export interface EvaluatorHandle extends ActorHandle {
  readonly nodeId: string;
  metrics(): EvaluatorMetrics;
}

export async function startEvaluator(deps: EvaluatorDeps, opts: EvaluatorOptions = {}): Promise<EvaluatorHandle> {
  const nodeId = opts.nodeId ?? `ev-${randomBytes(4).toString("hex")}`;
  const pool = opts.pool ?? "default";
  const now = opts.now ?? Date.now;
  const log = deps.log.child({ actor: "evaluator", node_id: nodeId });
  const infraOpts = { ...DEFAULT_INFRA, ...opts.infra };
  const infra = await openInfra(deps.nc, infraOpts);
  const durable = await ensureEvaluatorConsumer(infra.jsm, pool, infraOpts);
  if (!opts.hostedBy) await reapLeftovers(nodeId, log);
  const workRoot = opts.workRoot ?? join(tmpdir(), `polar-${nodeId}`);
  await mkdir(workRoot, { recursive: true });
  const maxConcurrency = opts.maxConcurrency ?? 2;
  const metrics = EvaluatorMetrics.parse({});
  const h: HandleContext = {
    nodeId,
    registries: deps.registries,
    workRoot,
    toolsDir: opts.toolsDir ?? (existsSync(toolsDir()) ? toolsDir() : undefined),
    log,
    now,
  };
  const keepAliveMs = Math.max(200, Math.floor(infraOpts.evalAckWaitMs / 3));
  const stop = new AbortController();
  /** Evaluations in flight by session id, so a session's cancellation stops its evaluation. */
  const running = new Map<string, AbortController>();
  const inflight = new Set<Promise<void>>();

  const heartbeatMs = opts.heartbeatIntervalMs ?? 5000;
  const startedAt = new Date(now()).toISOString();
  const info = (): EvaluatorNodeInfo => ({
    kind: "evaluator",
    node_id: nodeId,
    pool,
    max_concurrency: maxConcurrency,
    hosted_by: opts.hostedBy ?? null,
    host: hostname(),
    heartbeat_interval_seconds: heartbeatMs / 1000,
    started_at: startedAt,
    metrics: { ...metrics },
    healthy: true,
    draining: stop.signal.aborted,
    last_heartbeat: new Date(now()).toISOString(),
  });
  let beating = false;
  const beat = async () => {
    if (beating) return;
    beating = true;
    try {
      await infra.nodes.put(nodeKey(nodeId), encode(info()));
    } catch (err) {
      log.warn({ err: errorMessage(err) }, "evaluator heartbeat failed");
    } finally {
      beating = false;
    }
  };
  await beat();
  const hbTimer = setInterval(() => void beat(), heartbeatMs * (0.9 + Math.random() * 0.2));
  hbTimer.unref();

  const cancelSub = deps.nc.subscribe(SUBJECTS.sessionCancelAll, {
    callback: (err, msg) => {
      if (err) return log.error({ err }, "cancel subscription failed");
      const sid = msg.subject.slice(msg.subject.lastIndexOf(".") + 1).replaceAll("_2E_", ".");
      running.get(sid)?.abort(new PolarError("cancelled", "session cancelled"));
    },
  });

  const one = async (msg: JsMsg, release: () => void) => {
    const keepAlive = setInterval(() => msg.working(), keepAliveMs);
    keepAlive.unref();
    metrics.inflight++;
    let req: EvalRequest | undefined;
    const cancel = new AbortController();
    try {
      try {
        req = validate(EvalRequest, await readDurable(infra, msg.data, msg.headers), "evaluation request");
      } catch (err) {
        // A malformed request can never be evaluated: drop it so it is not redelivered forever.
        log.error({ err: errorMessage(err), seq: msg.seq }, "dropping a malformed evaluation request");
        metrics.failed++;
        msg.term();
        return;
      }
      if (msg.info.deliveryCount > 1) metrics.redelivered++;
      running.set(req.session_id, cancel);
      const reply = await handleEvalRequest(h, req, msg.info.deliveryCount, AbortSignal.any([stop.signal, cancel.signal]), Date.parse(req.created_at));
      if (reply.error?.code === "timeout" && reply.timing.eval_ms === 0) metrics.expired++;
      else if (reply.error) metrics.failed++;
      else metrics.completed++;
      metrics.eval_ms_total += reply.timing.eval_ms;
      await publishReply(infra, reply);
      msg.ack();
    } catch (err) {
      if (cancel.signal.aborted && !stop.signal.aborted) {
        msg.term(); // the session was cancelled: nobody waits for this evaluation
      } else {
        // Leaving, or the reply could not be published: another evaluator takes it.
        log.warn({ err: errorMessage(err), session_id: req?.session_id }, "evaluation handed back to the queue");
        msg.nak();
      }
    } finally {
      if (req && running.get(req.session_id) === cancel) running.delete(req.session_id);
      metrics.inflight--;
      clearInterval(keepAlive);
      release();
    }
  };

  const slots = new Semaphore(maxConcurrency);
  const pullLoop = async (consumer: Consumer) => {
    while (!stop.signal.aborted) {
      let release: (() => void) | undefined;
      try {
        release = await slots.acquire(stop.signal);
        const msg = await consumer.next({ expires: 1000 });
        if (!msg) {
          release();
          continue;
        }
        if (stop.signal.aborted) {
          msg.nak();
          release();
          break;
        }
        const p = one(msg, release);
        inflight.add(p);
        void p.finally(() => inflight.delete(p));
      } catch (err) {
        release?.();
        if (stop.signal.aborted) break;
        log.warn({ err: errorMessage(err) }, "evaluation pull failed; retrying");
        await sleep(500, stop.signal).catch(() => {});
      }
    }
  };
  const consumer = await infra.js.consumers.get(STREAMS.evals, durable);
  const pulling = pullLoop(consumer);
  log.info({ pool, maxConcurrency }, "evaluator started");

  return actorHandle(
    { nodeId, metrics: () => ({ ...metrics }) },
    [
      () => stop.abort(new PolarError("cancelled", "evaluator stopping")),
      () => pulling,
      async () => {
        while (inflight.size) await Promise.allSettled([...inflight]);
      },
      () => clearInterval(hbTimer),
      () => cancelSub.unsubscribe(),
      () => infra.nodes.delete(nodeKey(nodeId)),
      () => (opts.workRoot ? undefined : rm(workRoot, { recursive: true, force: true })),
    ],
    (err) => log.warn({ err }, "evaluator stop step failed"),
  );
}

async function publishReply(infra: Infra, reply: EvalReply): Promise<void> {
  // One reply per attempt: a request evaluated twice (redelivered after a slow ack) answers once.
  await publishDurable(infra, SUBJECTS.evalResult(reply.session_id), reply, `eval:${reply.session_id}:${reply.attempt}`);
}
