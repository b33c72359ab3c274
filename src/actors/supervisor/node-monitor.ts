/**
 * Reads the gateways' heartbeats and decides when a node is gone: no beat for
 * `missedBeats` of its intervals (and at least `minSilenceMs`), counted from
 * the later of its last beat and the monitor's own last (re)connection or
 * stall, so a NATS outage that silenced everybody, or this process stalling,
 * is not taken for dead nodes; and the node does not answer a ping (a node
 * whose beats were only late keeps its sessions). A gone
 * node is announced (`node.left`), removed from `polar_nodes`, and its session
 * leases are expired: each lease is deleted and the delivery it names is
 * NAKed, so the session is redelivered at once instead of after ack_wait.
 */
import { kvKeys } from "../../nats/kv-keys.ts";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { decode } from "../../protocol/codec.ts";
import { errorMessage } from "../../protocol/errors.ts";
import { NodeHeartbeat, SessionLease } from "../../protocol/schemas.ts";
import { STREAMS, SUBJECTS, nodeKey, type EventKind } from "../../protocol/subjects.ts";
import type { Infra } from "../../nats/infra.ts";
import { request } from "../../nats/messages.ts";

export interface LivenessOptions {
  /** Beats a node may miss before it is gone (default 3). */
  missedBeats: number;
  /** Never less silence than this before a node is gone (default 5000 ms: a loaded host stalls for seconds). */
  minSilenceMs: number;
  /** Used until a node says its interval (default 5000 ms). */
  defaultIntervalMs: number;
}

export const DEFAULT_LIVENESS: LivenessOptions = { missedBeats: 3, minSilenceMs: 5000, defaultIntervalMs: 5000 };

interface Seen {
  last: number;
  intervalMs: number;
}

/** The bookkeeping, with an injected clock (ms). */
export class Liveness {
  readonly #seen = new Map<string, Seen>();
  /** The interval each node last said (kept when it is reported gone, for a node that turns out alive). */
  readonly #intervals = new Map<string, number>();
  #since: number;

  constructor(
    private readonly now: () => number,
    private readonly o: LivenessOptions = DEFAULT_LIVENESS,
  ) {
    this.#since = now();
  }

  beat(nodeId: string, intervalMs?: number): void {
    const interval = intervalMs ?? this.#intervals.get(nodeId) ?? this.o.defaultIntervalMs;
    this.#intervals.set(nodeId, interval);
    this.#seen.set(nodeId, { last: this.now(), intervalMs: interval });
  }

  /** A node that left on its own: not reported as gone. */
  forget(nodeId: string): void {
    this.#seen.delete(nodeId);
    this.#intervals.delete(nodeId);
  }

  /** The monitor itself was cut off: silences before now say nothing about the nodes. */
  reconnected(): void {
    this.#since = this.now();
  }

  /** Nodes gone since the last call (each reported once). */
  gone(): string[] {
    const now = this.now();
    const out: string[] = [];
    for (const [id, s] of this.#seen) {
      const silence = now - Math.max(s.last, this.#since);
      if (silence > Math.max(this.o.minSilenceMs, this.o.missedBeats * s.intervalMs)) {
        out.push(id);
        this.#seen.delete(id);
      }
    }
    return out;
  }

  get known(): string[] {
    return [...this.#seen.keys()];
  }
}

export interface NodeMonitorDeps {
  nc: NatsConnection;
  infra: Infra;
  log: Logger;
  emit(kind: EventKind, body: unknown): void;
  /** Called for each gone node after its leases were expired. */
  onGone?(nodeId: string, sessions: string[]): void;
}

export interface NodeMonitor {
  readonly liveness: Liveness;
  stop(): Promise<void>;
}

/** How long a silent node has to answer the monitor's ping (a dead one has no responder and fails at once). */
export const DEFAULT_PING_TIMEOUT_MS = 3000;

/** True when the node answers on its ping subject within `timeoutMs`. */
async function answersPing(d: Pick<NodeMonitorDeps, "nc" | "log">, nodeId: string, timeoutMs: number): Promise<boolean> {
  try {
    await request(d.nc, SUBJECTS.nodePing(nodeId), { node_id: nodeId }, { timeoutMs });
    return true;
  } catch (err) {
    d.log.debug({ node_id: nodeId, err: errorMessage(err) }, "node did not answer its ping");
    return false;
  }
}

export function startNodeMonitor(
  d: NodeMonitorDeps,
  opts: Partial<LivenessOptions> & { checkEveryMs?: number; now?: () => number; pingTimeoutMs?: number } = {},
): NodeMonitor {
  const liveness = new Liveness(opts.now ?? (() => performance.now()), { ...DEFAULT_LIVENESS, ...opts });
  const beats = d.nc.subscribe(SUBJECTS.heartbeatAll, {
    callback: (err, msg) => {
      if (err) return d.log.warn({ err }, "heartbeat subscription failed");
      const hb = NodeHeartbeat.safeParse(safeDecode(msg.data));
      if (!hb.success) return d.log.warn({ subject: msg.subject }, "malformed heartbeat");
      liveness.beat(hb.data.node_id, hb.data.interval_ms);
    },
  });
  const left = d.nc.subscribe(SUBJECTS.event("node.left"), {
    callback: (_err, msg) => {
      const ev = safeDecode(msg.data) as { node_id?: unknown; reason?: unknown } | undefined;
      // A graceful leave (no reason given by a monitor): stop watching it.
      if (typeof ev?.node_id === "string" && ev.reason === undefined) liveness.forget(ev.node_id);
    },
  });
  let stopped = false;
  void (async () => {
    for await (const s of d.nc.status()) {
      if (stopped) break;
      if (s.type === "reconnect") liveness.reconnected();
    }
  })().catch((err) => d.log.debug({ err: errorMessage(err) }, "status iterator ended"));
  let checking = false;
  const every = opts.checkEveryMs ?? 500;
  let lastTick = performance.now();
  const timer = setInterval(() => {
    // This process stalled (a loaded host, a long GC): beats may sit unread in its buffers, so the
    // silence it measured says nothing about the nodes; count anew from now.
    const tick = performance.now();
    if (tick - lastTick > 2 * every + 1000) liveness.reconnected();
    lastTick = tick;
    if (checking) return;
    checking = true;
    void (async () => {
      for (const nodeId of liveness.gone()) {
        // Silent is not dead: a node that still answers (its loop was busy, its beats were late) keeps its sessions.
        if (await answersPing(d, nodeId, opts.pingTimeoutMs ?? DEFAULT_PING_TIMEOUT_MS)) {
          d.log.warn({ node_id: nodeId }, "node silent past its heartbeats but answered a ping: kept, with its sessions");
          liveness.beat(nodeId);
          continue;
        }
        await nodeGone(d, nodeId);
      }
    })()
      .catch((err) => d.log.warn({ err: errorMessage(err) }, "node check failed"))
      .finally(() => (checking = false));
  }, every);
  timer.unref();
  return {
    liveness,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await Promise.all([beats.drain(), left.drain()]).catch(() => undefined);
    },
  };
}

async function nodeGone(d: NodeMonitorDeps, nodeId: string): Promise<void> {
  d.log.warn({ node_id: nodeId }, "node gone: its heartbeats stopped; releasing its sessions");
  d.emit("node.left", { node_id: nodeId, reason: "heartbeats stopped" });
  await d.infra.nodes.delete(nodeKey(nodeId)).catch((err) => d.log.warn({ err: errorMessage(err) }, "could not remove a gone node"));
  const released = await expireLeases(d, nodeId);
  d.onGone?.(nodeId, released);
}

/**
 * Deletes every lease the node holds (compare-and-set) and NAKs the delivery
 * each names, except a lease whose dispatch message is gone from the work
 * queue: the gateway acks it only once the session's result is durably in
 * POLAR_RESULTS, so that result is on its way to the supervisor, which checks
 * it against this lease and marks the lease finished. (Releasing it made the
 * result look unleased: it was refused, and with the delivery already acked
 * nothing ran the session again.)
 */
export async function expireLeases(d: Pick<NodeMonitorDeps, "nc" | "infra" | "log">, nodeId: string): Promise<string[]> {
  const kv = d.infra.leases;
  const released: string[] = [];
  for (const key of await kvKeys(kv)) {
    const e = await kv.get(key);
    if (!e || e.operation !== "PUT") continue;
    const lease = SessionLease.safeParse(safeDecode(e.value));
    if (!lease.success || lease.data.node_id !== nodeId || lease.data.finished_at) continue; // a finished session stays finished
    if (await dispatchAcked(d, lease.data.ack_subject)) {
      d.log.info({ session_id: lease.data.session_id, attempt: lease.data.attempt }, "the gone node's result for this session is published; its lease is kept for it");
      continue;
    }
    try {
      await kv.delete(key, { previousSeq: e.revision });
    } catch (err) {
      d.log.debug({ err: errorMessage(err), key }, "lease changed meanwhile; left alone");
      continue;
    }
    if (lease.data.ack_subject) d.nc.publish(lease.data.ack_subject, "-NAK");
    released.push(lease.data.session_id);
  }
  return released;
}

/** The stream sequence a JetStream ack subject names (`$JS.ACK.[domain.account.]stream.consumer.delivered.sseq...`). */
export function ackStreamSeq(ackSubject: string): number | undefined {
  const t = ackSubject.split(".");
  if (t[0] !== "$JS" || t[1] !== "ACK") return undefined;
  const i = t.length === 9 ? 5 : t.length >= 11 ? 7 : -1;
  const n = i < 0 ? NaN : Number(t[i]);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** Whether the dispatch message behind an ack subject is known to be gone from POLAR_SESSIONS (acked); false when unknown. */
async function dispatchAcked(d: Pick<NodeMonitorDeps, "infra" | "log">, ackSubject: string | undefined): Promise<boolean> {
  const seq = ackSubject ? ackStreamSeq(ackSubject) : undefined;
  if (seq === undefined) return false;
  try {
    return (await d.infra.jsm.streams.getMessage(STREAMS.sessions, { seq })) === null; // null: no such message
  } catch (err) {
    d.log.debug({ err: errorMessage(err), seq }, "could not tell whether a dispatch was acked; releasing its lease");
    return false;
  }
}

function safeDecode(b: Uint8Array): unknown {
  try {
    return decode(b);
  } catch {
    return undefined; // reported by the caller as malformed
  }
}
