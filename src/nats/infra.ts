/**
 * The JetStream objects the system needs (streams, the shared dispatch
 * consumer, KV buckets, object store), created idempotently by whichever
 * actor starts first.
 */
import { registerSecret } from "../security/redact.ts";
import { connect, nanos, type NatsConnection } from "@nats-io/transport-node";
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
} from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { Objm, type ObjectStore } from "@nats-io/obj";
import { natsAuthFromEnv, natsConnectOptions, type NatsAuth } from "../security/nats-auth.ts";
import { BUCKETS, RESULTS_CONSUMER, STREAMS, SUBJECTS, dispatchConsumer, evaluatorConsumer, kvStream } from "../protocol/subjects.ts";

export interface Infra {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  tasks: KV;
  /**
   * The same tasks bucket, read from its stream's leader only. On a cluster,
   * `tasks` answers reads from any replica (direct gets), and a replica may
   * not have applied the latest writes yet: read-modify-write and decisions
   * that must see every acknowledged write read through this one.
   */
  tasksLeader: KV;
  nodes: KV;
  /** Cluster-wide control state (`polar_control`): inference paused, policy version. */
  control: KV;
  /** Session leases (which node holds which attempt). */
  leases: KV;
  blobs: ObjectStore;
  taskFlags: KV;
}

/** Retention of one stream or bucket: oldest message age and total size (0 = unlimited). */
export interface Retention {
  maxAgeMs: number;
  maxBytes: number;
}

/** Every stream and bucket by its role. */
export type StoreName = "sessions" | "results" | "traces" | "evals" | "evalResults" | "tasks" | "nodes" | "blobs" | "leases" | "taskFlags" | "control";

const DAY = 24 * 3600_000;
const MIB = 1024 ** 2;
/**
 * Defaults: storage is bounded everywhere, about 5 GiB in all (JetStream
 * reserves max_bytes up front, so the defaults fit a small disk; raise them
 * for long runs). Ages exceed the longest session budget (7 days) so live
 * state never expires under a running task.
 */
export const DEFAULT_RETENTION: Record<StoreName, Retention> = {
  sessions: { maxAgeMs: 8 * DAY, maxBytes: 512 * MIB },
  results: { maxAgeMs: 30 * DAY, maxBytes: 1024 * MIB },
  traces: { maxAgeMs: 30 * DAY, maxBytes: 2048 * MIB },
  evals: { maxAgeMs: 8 * DAY, maxBytes: 256 * MIB },
  evalResults: { maxAgeMs: 1 * DAY, maxBytes: 256 * MIB },
  tasks: { maxAgeMs: 30 * DAY, maxBytes: 256 * MIB },
  nodes: { maxAgeMs: 0, maxBytes: 16 * MIB },
  blobs: { maxAgeMs: 30 * DAY, maxBytes: 1024 * MIB },
  leases: { maxAgeMs: 8 * DAY, maxBytes: 64 * MIB },
  taskFlags: { maxAgeMs: 30 * DAY, maxBytes: 64 * MIB },
  /** Cluster control state must never expire. */
  control: { maxAgeMs: 0, maxBytes: 16 * MIB },
};

export interface InfraOptions {
  /** How long a gateway may hold a session without `working()` before it is redelivered. */
  dispatchAckWaitMs?: number;
  /** Attempts per session before it is given up (the supervisor records an ERROR). */
  maxDeliver?: number;
  /** TTL of node registry entries (a node refreshes its entry with every heartbeat). */
  nodeTtlMs?: number;
  /** Copies of every stream, KV bucket and the object store kept across a NATS cluster (1 on a single server; 3 or 5 on a cluster). */
  replicas?: number;
  /** How long an evaluator may hold an evaluation request without `working()` before it is redelivered. */
  evalAckWaitMs?: number;
  /** Deliveries of an evaluation request before it is given up (the waiting gateway then hits its budget). */
  evalMaxDeliver?: number;
  /** Max age / max bytes per stream and bucket (unset ones keep DEFAULT_RETENTION). */
  retention?: Partial<Record<StoreName, Partial<Retention>>>;
}

export const DEFAULT_INFRA: Required<InfraOptions> = {
  dispatchAckWaitMs: 30_000,
  maxDeliver: 5,
  nodeTtlMs: 90_000,
  replicas: 1,
  evalAckWaitMs: 30_000,
  evalMaxDeliver: 5,
  retention: DEFAULT_RETENTION,
};

export function retentionOf(opts: InfraOptions, name: StoreName): Retention {
  const r = opts.retention?.[name];
  const d = DEFAULT_RETENTION[name];
  return { maxAgeMs: r?.maxAgeMs ?? d.maxAgeMs, maxBytes: r?.maxBytes ?? d.maxBytes };
}

/** Server URLs from a list or a comma-separated string (`nats://a:4222,nats://b:4222`). */
export function natsServers(servers: string | readonly string[]): string[] {
  const list = (typeof servers === "string" ? [servers] : [...servers]).flatMap((s) => s.split(",")).map((s) => s.trim()).filter(Boolean);
  if (!list.length) throw new TypeError("no NATS server URL given");
  return list;
}

/** Connects to any of the servers (a cluster's members); reconnects forever, to whichever answers. */
export async function connectNats(
  servers: string | readonly string[],
  name: string,
  /** This actor's credentials and TLS (default: POLAR_NATS_* from the environment). */
  auth: NatsAuth | undefined = natsAuthFromEnv(),
): Promise<NatsConnection> {
  registerSecret(auth?.password, auth?.token);
  return connect({ servers: natsServers(servers), name, maxReconnectAttempts: -1, reconnectTimeWait: 250, ...natsConnectOptions(auth) });
}

/**
 * Flushes and closes a connection, bounded: a drain that cannot finish
 * (server gone) is cut short by a plain close after `timeoutMs`.
 */
export async function closeNats(nc: NatsConnection, timeoutMs = 3000): Promise<void> {
  if (nc.isClosed()) return;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), timeoutMs)));
  try {
    await Promise.race([nc.drain(), timedOut]);
  } catch {
    // A drain that fails (connection already closing or lost) ends in the close below.
  } finally {
    clearTimeout(timer);
  }
  if (!nc.isClosed()) await nc.close();
}

async function ensureStream(jsm: JetStreamManager, cfg: Parameters<JetStreamManager["streams"]["add"]>[0]): Promise<void> {
  try {
    await jsm.streams.info(cfg.name!);
  } catch {
    try {
      await jsm.streams.add(cfg);
    } catch (err) {
      // Another actor may have created it meanwhile.
      await jsm.streams.info(cfg.name!).catch(() => Promise.reject(err));
    }
  }
}

type ConsumerConfig = Parameters<JetStreamManager["consumers"]["add"]>[1];

/** Creates a durable consumer unless it exists (or another actor created it meanwhile). */
async function ensureConsumer(jsm: JetStreamManager, stream: string, cfg: ConsumerConfig & { durable_name: string }): Promise<string> {
  try {
    await jsm.consumers.info(stream, cfg.durable_name);
  } catch {
    await jsm.consumers.add(stream, cfg).catch(async (err) => {
      await jsm.consumers.info(stream, cfg.durable_name).catch(() => Promise.reject(err));
    });
  }
  return cfg.durable_name;
}

export function ensureDispatchConsumer(jsm: JetStreamManager, pool: string, opts: InfraOptions = {}): Promise<string> {
  const o = { ...DEFAULT_INFRA, ...opts };
  return ensureConsumer(jsm, STREAMS.sessions, {
    durable_name: dispatchConsumer(pool),
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(o.dispatchAckWaitMs),
    max_deliver: o.maxDeliver,
    filter_subject: SUBJECTS.dispatch(pool),
    deliver_policy: DeliverPolicy.All,
    max_ack_pending: -1,
  });
}

/** The work-queue consumer all evaluators of a pool share. */
export function ensureEvaluatorConsumer(jsm: JetStreamManager, pool: string, opts: InfraOptions = {}): Promise<string> {
  const o = { ...DEFAULT_INFRA, ...opts };
  return ensureConsumer(jsm, STREAMS.evals, {
    durable_name: evaluatorConsumer(pool),
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(o.evalAckWaitMs),
    max_deliver: o.evalMaxDeliver,
    filter_subject: SUBJECTS.evalRequest(pool),
    deliver_policy: DeliverPolicy.All,
    max_ack_pending: -1,
  });
}
/** Deliveries of one result before the supervisor records it as failed (see results.ts). */
export const RESULT_MAX_DELIVER = 10;

/**
 * How long one pull of a long-running `consume()` waits. nats.js re-pulls
 * after two missed idle heartbeats (half of this each), so it is also how
 * long a consumer stalls when its pull is lost with a NATS node (its
 * default, 30 s, stalled the supervisor's results for 34 s after a cluster
 * node was killed).
 */
export const CONSUME_EXPIRES_MS = 5000;

export function ensureResultsConsumer(jsm: JetStreamManager): Promise<string> {
  return ensureConsumer(jsm, STREAMS.results, {
    durable_name: RESULTS_CONSUMER,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(30_000),
    deliver_policy: DeliverPolicy.All,
    max_deliver: RESULT_MAX_DELIVER,
  });
}

/**
 * Work queue for dispatch (a full queue refuses new sessions rather than
 * dropping queued ones); limits retention for results and traces. Duplicates
 * within 10 min are dropped.
 */
const STREAM_DEFS = [
  { role: "sessions", name: STREAMS.sessions, subjects: [SUBJECTS.streamSubjects.sessions], retention: RetentionPolicy.Workqueue, discard: DiscardPolicy.New },
  { role: "results", name: STREAMS.results, subjects: [SUBJECTS.streamSubjects.results], retention: RetentionPolicy.Limits, discard: DiscardPolicy.Old },
  { role: "traces", name: STREAMS.traces, subjects: [SUBJECTS.streamSubjects.traces], retention: RetentionPolicy.Limits, discard: DiscardPolicy.Old },
  { role: "evals", name: STREAMS.evals, subjects: [SUBJECTS.streamSubjects.evals], retention: RetentionPolicy.Workqueue, discard: DiscardPolicy.New },
  // A result is read once by the waiting gateway; a day bounds what a gateway that died leaves behind.
  { role: "evalResults", name: STREAMS.evalResults, subjects: [SUBJECTS.streamSubjects.evalResults], retention: RetentionPolicy.Limits, discard: DiscardPolicy.Old },
] as const;

export async function openInfra(nc: NatsConnection, opts: InfraOptions = {}): Promise<Infra> {
  const o = { ...DEFAULT_INFRA, ...opts };
  const jsm = await jetstreamManager(nc);
  const limits = (name: StoreName) => {
    const r = retentionOf(o, name);
    return { max_age: nanos(r.maxAgeMs), max_bytes: r.maxBytes > 0 ? r.maxBytes : -1 };
  };
  for (const { role, ...def } of STREAM_DEFS) {
    await ensureStream(jsm, { ...def, subjects: [...def.subjects], ...limits(role), storage: StorageType.File, duplicate_window: nanos(10 * 60_000), num_replicas: o.replicas });
  }
  const kvm = new Kvm(nc);
  const tasks = await kvm.create(BUCKETS.tasks, { history: 1, replicas: o.replicas });
  const tasksLeader = await kvm.open(BUCKETS.tasks, { allow_direct: false });
  const nodes = await kvm.create(BUCKETS.nodes, { history: 1, ttl: o.nodeTtlMs, replicas: o.replicas });
  const control = await kvm.create(BUCKETS.control, { history: 1, replicas: o.replicas });
  // Leases are read-modify-written and decide whose result counts: reads go to the stream's leader
  // (no direct gets from a replica that may not have applied the latest write).
  const leases = await kvm.create(BUCKETS.leases, { history: 1, replicas: o.replicas, allow_direct: false });
  const taskFlags = await kvm.create(BUCKETS.taskFlags, { history: 1, replicas: o.replicas });
  const blobs = await new Objm(nc).create(BUCKETS.blobs, { replicas: o.replicas });
  // Buckets and streams that already existed get the configured limits too.
  const stores: Array<[StoreName, string]> = [
    ...STREAM_DEFS.map((d): [StoreName, string] => [d.role, d.name]),
    ["tasks", kvStream(BUCKETS.tasks)],
    ["nodes", kvStream(BUCKETS.nodes)],
    ["leases", kvStream(BUCKETS.leases)],
    ["taskFlags", kvStream(BUCKETS.taskFlags)],
    ["control", kvStream(BUCKETS.control)],
    ["blobs", `OBJ_${BUCKETS.blobs}`],
  ];
  for (const [role, stream] of stores) {
    const want = limits(role);
    // The node registry's age is its entry TTL.
    if (role === "nodes") want.max_age = nanos(o.nodeTtlMs);
    await applyLimits(jsm, stream, want);
  }
  return { nc, js: jetstream(nc), jsm, tasks, tasksLeader, nodes, control, blobs, leases, taskFlags };
}

async function applyLimits(jsm: JetStreamManager, stream: string, want: { max_age: number; max_bytes: number }): Promise<void> {
  const info = await jsm.streams.info(stream);
  if (info.config.max_age === want.max_age && info.config.max_bytes === want.max_bytes) return;
  await jsm.streams.update(stream, { ...info.config, ...want });
}
