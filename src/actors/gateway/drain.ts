/**
 * Draining a gateway: pull nothing more, let the sessions it holds finish
 * within a timeout (their results are published as usual), then leave. At
 * the timeout, or when `stop()` is called meanwhile (a second signal), what
 * is still held is cancelled and requeued for another gateway.
 */
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { serveRequests } from "../../nats/messages.ts";
import { validate } from "../../protocol/codec.ts";
import { PolarError } from "../../protocol/errors.ts";
import { NodeDrainRequest, type NodeDrainReply } from "../../protocol/schemas.ts";
import { SUBJECTS } from "../../protocol/subjects.ts";

export const DEFAULT_DRAIN_TIMEOUT_MS = 300_000;

export interface DrainDeps {
  nodeId: string;
  log: Logger;
  defaultTimeoutMs: number;
  /** Sessions held right now. */
  held(): number;
  /** Stops pulling and marks the node draining in its heartbeats. */
  stopPulling(): void;
  /** Resolves when nothing is held any more. */
  settle(): Promise<void>;
  /** The gateway's stop: cancels and requeues whatever is still held, then leaves. */
  leave(reason: string): Promise<void>;
  /** Timers (injectable for tests). */
  setTimer?: (fn: () => void, ms: number) => { cancel(): void };
}

export interface Drainer {
  /** Starts a drain (idempotent: a running drain keeps its first timeout) and resolves when the node has left. */
  drain(timeoutMs?: number): Promise<void>;
  /** Starts a drain and answers at once with what is held. */
  begin(timeoutMs?: number): NodeDrainReply;
  readonly active: boolean;
}

const defaultTimer = (fn: () => void, ms: number) => {
  const t = setTimeout(fn, ms);
  return { cancel: () => clearTimeout(t) };
};

export function createDrainer(d: DrainDeps): Drainer {
  let running: Promise<void> | undefined;
  let timeoutSeconds = d.defaultTimeoutMs / 1000;
  const setTimer = d.setTimer ?? defaultTimer;
  const drain = (timeoutMs = d.defaultTimeoutMs) => {
    running ??= (async () => {
      timeoutSeconds = timeoutMs / 1000;
      const held = d.held();
      d.log.info({ held, timeout_ms: timeoutMs }, "draining: pulling nothing more, finishing what is held");
      d.stopPulling();
      let timedOut = false;
      await new Promise<void>((resolve) => {
        const timer = setTimer(() => {
          timedOut = true;
          resolve();
        }, timeoutMs);
        void d.settle().then(() => {
          timer.cancel();
          resolve();
        });
      });
      if (timedOut) d.log.warn({ held: d.held() }, "drain timeout: requeueing what is still held");
      else d.log.info("drained: every held session finished");
      await d.leave(timedOut ? "drain timeout" : "drained");
    })();
    return running;
  };
  return {
    drain,
    begin(timeoutMs) {
      const held = d.held();
      void drain(timeoutMs).catch((err) => d.log.error({ err }, "drain failed"));
      return { node_id: d.nodeId, draining: true, held_sessions: held, timeout_seconds: timeoutSeconds };
    },
    get active() {
      return !!running;
    },
  };
}

/** Serves this node's drain endpoint (`polar.node.drain.<node_id>`). */
export function serveDrain(nc: NatsConnection, drainer: Drainer, nodeId: string, log: Logger): Subscription {
  return serveRequests(
    nc,
    SUBJECTS.nodeDrain(nodeId),
    async (body) => {
      const req = validate(NodeDrainRequest, body, "drain request");
      if (req.node_id !== nodeId) throw new PolarError("validation", `drain request for ${req.node_id} reached node ${nodeId}`);
      return drainer.begin(req.timeout_seconds === undefined ? undefined : req.timeout_seconds * 1000);
    },
    log,
  );
}
