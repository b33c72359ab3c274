/**
 * Retention reaches the server: `infra.retention` in a config file becomes
 * the max age / max bytes of the streams and buckets on a real nats-server
 * (read back from the server's stream info), unset ones keep the bounded
 * defaults, an actor started with other limits updates streams that already
 * exist, and the server then enforces them (old traces are dropped).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSupervisor } from "../src/actors/supervisor/index.ts";
import { startEvaluator } from "../src/actors/evaluator/index.ts";
import { infraOptionsFrom, loadConfig } from "../src/app/config.ts";
import { createRegistries, specChecker } from "../src/app/registries.ts";
import { connectNats, DEFAULT_RETENTION, type StoreName } from "../src/nats/infra.ts";
import { startNatsServer, type NatsServerHandle } from "../src/nats/launcher.ts";
import { BUCKETS, STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import { silentLogger } from "../src/util/log.ts";

const MIB = 1024 ** 2;
const NS = 1_000_000; // nanoseconds per millisecond
const STORES: Record<StoreName, string> = {
  sessions: STREAMS.sessions,
  results: STREAMS.results,
  traces: STREAMS.traces,
  evals: STREAMS.evals,
  evalResults: STREAMS.evalResults,
  tasks: `KV_${BUCKETS.tasks}`,
  nodes: `KV_${BUCKETS.nodes}`,
  leases: `KV_${BUCKETS.leases}`,
  taskFlags: `KV_${BUCKETS.taskFlags}`,
  control: `KV_${BUCKETS.control}`,
  blobs: `OBJ_${BUCKETS.blobs}`,
};

describe("retention (infra.retention) on a real nats-server", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let dir: string;
  const stops: Array<() => Promise<unknown>> = [];
  const log = silentLogger();

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connectNats(nats.url, "test-retention");
    jsm = await jetstreamManager(nc);
    dir = await mkdtemp(join(tmpdir(), "polar-retention-"));
  });
  afterAll(async () => {
    for (const s of stops.reverse()) await s().catch(() => {});
    await nc?.close();
    await nats?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const config = async (name: string, retention: Record<string, unknown>) => {
    const p = join(dir, name);
    await writeFile(p, JSON.stringify({ infra: { node_ttl_ms: 20_000, retention } }));
    return infraOptionsFrom(await loadConfig(p));
  };
  const limits = async (stream: string) => {
    const { config: c } = await jsm.streams.info(stream);
    return { max_age: c.max_age, max_bytes: c.max_bytes };
  };

  it("a config file's limits become every stream's and bucket's max_age / max_bytes; unset ones keep the bounded defaults", async () => {
    const infra = await config("first.json", {
      traces: { max_age_ms: 3_600_000, max_bytes: 8 * MIB },
      tasks: { max_age_ms: 2 * 86_400_000 },
      blobs: { max_bytes: 64 * MIB },
      results: { max_age_ms: 0 },
    });
    const sup = await startSupervisor({ nc, log, check: specChecker(createRegistries()) }, { infra, sweepIntervalMs: 60_000 });
    stops.push(() => sup.stop());

    expect(await limits(STREAMS.traces)).toEqual({ max_age: 3_600_000 * NS, max_bytes: 8 * MIB });
    expect(await limits(`KV_${BUCKETS.tasks}`)).toEqual({ max_age: 2 * 86_400_000 * NS, max_bytes: DEFAULT_RETENTION.tasks.maxBytes });
    expect(await limits(`OBJ_${BUCKETS.blobs}`)).toEqual({ max_age: DEFAULT_RETENTION.blobs.maxAgeMs * NS, max_bytes: 64 * MIB });
    // 0 = no age limit; the size stays bounded.
    expect(await limits(STREAMS.results)).toEqual({ max_age: 0, max_bytes: DEFAULT_RETENTION.results.maxBytes });
    // The node registry's age is its entry TTL.
    expect(await limits(`KV_${BUCKETS.nodes}`)).toEqual({ max_age: 20_000 * NS, max_bytes: DEFAULT_RETENTION.nodes.maxBytes });
    for (const name of ["sessions", "evals", "evalResults", "leases", "taskFlags", "control"] as const) {
      expect(await limits(STORES[name]), name).toEqual({ max_age: DEFAULT_RETENTION[name].maxAgeMs * NS, max_bytes: DEFAULT_RETENTION[name].maxBytes });
    }
    // Storage is bounded everywhere by default.
    for (const [name, stream] of Object.entries(STORES)) expect((await limits(stream)).max_bytes, name).toBeGreaterThan(0);
  });

  it("an actor started with other limits updates the streams that exist, and the server enforces them", async () => {
    const infra = await config("second.json", { traces: { max_age_ms: 600_000, max_bytes: 256 * 1024 } });
    const ev = await startEvaluator({ nc, log, registries: createRegistries() }, { nodeId: "ev-retention", infra, workRoot: join(dir, "ev") });
    stops.push(() => ev.stop());
    expect(await limits(STREAMS.traces)).toEqual({ max_age: 600_000 * NS, max_bytes: 256 * 1024 });

    // 40 traces of 16 KiB (640 KiB) into a stream that keeps 256 KiB: the oldest are dropped.
    const js = jetstream(nc);
    const body = new Uint8Array(16 * 1024).fill(7);
    for (let i = 0; i < 40; i++) await js.publish(SUBJECTS.trace("ret-task", `ses-${i}`), body);
    const { state } = await jsm.streams.info(STREAMS.traces);
    expect(state.bytes).toBeLessThanOrEqual(256 * 1024);
    expect(state.last_seq).toBe(40);
    expect(state.first_seq).toBeGreaterThan(1);
    expect(state.messages).toBeLessThan(40);
  });
});
