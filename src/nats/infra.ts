/**
 * The JetStream objects the system needs (streams, the shared dispatch
 * consumer, KV buckets, object store), created idempotently by whichever
 * actor starts first.
 */
import { connect, nanos, type NatsConnection } from "@nats-io/transport-node";
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
} from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { Objm, type ObjectStore } from "@nats-io/obj";
import { BUCKETS, RESULTS_CONSUMER, STREAMS, SUBJECTS, dispatchConsumer } from "../protocol/subjects.ts";

export interface Infra {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  tasks: KV;
  nodes: KV;
  blobs: ObjectStore;
}

export interface InfraOptions {
  /** How long a gateway may hold a session without `working()` before it is redelivered. */
  dispatchAckWaitMs?: number;
  /** Attempts per session before it is given up (the supervisor records an ERROR). */
  maxDeliver?: number;
  /** TTL of node registry entries (a node refreshes its entry with every heartbeat). */
  nodeTtlMs?: number;
}

export const DEFAULT_INFRA: Required<InfraOptions> = {
  dispatchAckWaitMs: 30_000,
  maxDeliver: 5,
  nodeTtlMs: 90_000,
};

export async function connectNats(servers: string, name: string): Promise<NatsConnection> {
  return connect({ servers, name, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
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

export async function ensureDispatchConsumer(jsm: JetStreamManager, pool: string, opts: InfraOptions = {}): Promise<string> {
  const o = { ...DEFAULT_INFRA, ...opts };
  const durable = dispatchConsumer(pool);
  try {
    await jsm.consumers.info(STREAMS.sessions, durable);
  } catch {
    await jsm.consumers
      .add(STREAMS.sessions, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        ack_wait: nanos(o.dispatchAckWaitMs),
        max_deliver: o.maxDeliver,
        filter_subject: SUBJECTS.dispatch(pool),
        deliver_policy: DeliverPolicy.All,
        max_ack_pending: -1,
      })
      .catch(async (err) => {
        await jsm.consumers.info(STREAMS.sessions, durable).catch(() => Promise.reject(err));
      });
  }
  return durable;
}

export async function ensureResultsConsumer(jsm: JetStreamManager): Promise<string> {
  try {
    await jsm.consumers.info(STREAMS.results, RESULTS_CONSUMER);
  } catch {
    await jsm.consumers
      .add(STREAMS.results, {
        durable_name: RESULTS_CONSUMER,
        ack_policy: AckPolicy.Explicit,
        ack_wait: nanos(30_000),
        deliver_policy: DeliverPolicy.All,
      })
      .catch(async (err) => {
        await jsm.consumers.info(STREAMS.results, RESULTS_CONSUMER).catch(() => Promise.reject(err));
      });
  }
  return RESULTS_CONSUMER;
}

export async function openInfra(nc: NatsConnection, opts: InfraOptions = {}): Promise<Infra> {
  const o = { ...DEFAULT_INFRA, ...opts };
  const jsm = await jetstreamManager(nc);
  await ensureStream(jsm, {
    name: STREAMS.sessions,
    subjects: [SUBJECTS.streamSubjects.sessions],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    // A re-published dispatch with the same id (supervisor restart) is dropped.
    duplicate_window: nanos(10 * 60_000),
  });
  await ensureStream(jsm, {
    name: STREAMS.results,
    subjects: [SUBJECTS.streamSubjects.results],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    duplicate_window: nanos(10 * 60_000),
  });
  await ensureStream(jsm, {
    name: STREAMS.traces,
    subjects: [SUBJECTS.streamSubjects.traces],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    duplicate_window: nanos(10 * 60_000),
  });
  const kvm = new Kvm(nc);
  const tasks = await kvm.create(BUCKETS.tasks, { history: 1 });
  const nodes = await kvm.create(BUCKETS.nodes, { history: 1, ttl: o.nodeTtlMs });
  const blobs = await new Objm(nc).create(BUCKETS.blobs);
  return { nc, js: jetstream(nc), jsm, tasks, nodes, blobs };
}
