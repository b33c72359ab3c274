/**
 * A 3-node nats-server cluster on localhost (JetStream, replicas 3): every
 * actor connects with the list of server URLs. One NATS node is killed
 * (SIGKILL) and one gateway is cut off during a task; the task still ends
 * with every result and every trace exactly once.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, type GatewayHandle } from "../src/actors/gateway/index.ts";
import { startSupervisor, type SupervisorHandle } from "../src/actors/supervisor/index.ts";
import { createRegistries, specChecker } from "../src/app/registries.ts";
import { findNatsServer } from "../src/nats/launcher.ts";
import { closeNats, connectNats, openInfra, type InfraOptions } from "../src/nats/infra.ts";
import { request, readDurable } from "../src/nats/messages.ts";
import type { TaskStatus } from "../src/protocol/schemas.ts";
import { STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import { startSim, type SimHandle } from "../src/sim/server.ts";
import { silentLogger } from "../src/util/log.ts";

const log = silentLogger();
const INFRA: InfraOptions = { dispatchAckWaitMs: 2500, maxDeliver: 5, nodeTtlMs: 10_000, replicas: 3 };
const CALL = `curl -sf "$OPENAI_BASE_URL/chat/completions" -H "authorization: Bearer $OPENAI_API_KEY" -H "content-type: application/json" -d '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}' >/dev/null`;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

interface Node {
  name: string;
  url: string;
  proc: ChildProcess;
  exited: Promise<unknown>;
}

async function startCluster(dir: string): Promise<Node[]> {
  const client = await Promise.all([0, 1, 2].map(() => freePort()));
  const route = await Promise.all([0, 1, 2].map(() => freePort()));
  const binary = findNatsServer();
  const nodes: Node[] = [];
  for (let i = 0; i < 3; i++) {
    const name = `n${i + 1}`;
    await mkdir(join(dir, name), { recursive: true });
    const routes = route.filter((_, j) => j !== i).map((p) => `nats-route://127.0.0.1:${p}`);
    const conf = join(dir, `${name}.conf`);
    await writeFile(
      conf,
      [
        `server_name: ${name}`,
        `listen: 127.0.0.1:${client[i]}`,
        `max_payload: 8MB`,
        `jetstream { store_dir: "${join(dir, name)}" }`,
        `cluster { name: polar-test, listen: 127.0.0.1:${route[i]}, routes: [${routes.join(", ")}] }`,
      ].join("\n"),
    );
    const proc = spawn(binary, ["-c", conf], { stdio: "ignore" });
    nodes.push({ name, url: `nats://127.0.0.1:${client[i]}`, proc, exited: new Promise((r) => proc.once("exit", r)) });
  }
  return nodes;
}

/** Retries a start-up step while the new cluster settles its leaders (its requests may time out meanwhile). */
async function settled<T>(fn: () => Promise<T>, timeoutMs = 30_000): Promise<T> {
  for (const deadline = Date.now() + timeoutMs; ; ) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/** The cluster is ready once a replicated stream can be created (a JetStream meta leader exists). */
async function waitJetStream(nc: NatsConnection, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: "READY_PROBE", subjects: ["ready.probe"], num_replicas: 3 });
      await jsm.streams.delete("READY_PROBE");
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

describe("a 3-node NATS cluster with replicas 3", () => {
  let dir: string;
  let nodes: Node[];
  let sim: SimHandle;
  let client: NatsConnection;
  let supervisor: SupervisorHandle;
  const conns: NatsConnection[] = [];
  const gateways: GatewayHandle[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "polar-cluster-"));
    nodes = await startCluster(dir);
    const urls = nodes.map((n) => n.url).join(",");
    client = await connectNats(urls, "test-client");
    await waitJetStream(client, 30_000);
    // Create the replicated streams and buckets once (retried while the new cluster settles its leaders).
    await settled(() => openInfra(client, INFRA));
    sim = await startSim({ log });
    const supNc = await connectNats(urls, "test-supervisor");
    conns.push(supNc);
    supervisor = await settled(() => startSupervisor({ nc: supNc, log, check: specChecker(createRegistries()) }, { infra: INFRA, sweepIntervalMs: 1000 }));
    for (const id of ["gw-c1", "gw-c2"]) {
      // Each gateway prefers a different server first (the list order), as gateways on many hosts would.
      const order = id === "gw-c1" ? [nodes[1].url, nodes[0].url, nodes[2].url] : [nodes[2].url, nodes[0].url, nodes[1].url];
      const nc = await connectNats(order, `test-${id}`);
      conns.push(nc);
      gateways.push(await settled(() => startGateway({ nc, log, registries: createRegistries() }, { nodeId: id, heartbeatIntervalMs: 500, infra: INFRA, limits: { maxRunWorkers: 3 }, proxy: { upstreams: [sim.url] } })));
    }
  }, 60_000);

  afterAll(async () => {
    for (const g of gateways) await g.stop().catch(() => {});
    await supervisor?.stop().catch(() => {});
    for (const nc of [...conns, client]) if (nc) await closeNats(nc, 1000);
    await sim?.stop();
    for (const n of nodes ?? []) n.proc.kill("SIGKILL");
    await Promise.all((nodes ?? []).map((n) => n.exited));
    await rm(dir, { recursive: true, force: true });
  });

  it("streams, KV and the object store are replicated 3 times", async () => {
    const jsm = await jetstreamManager(client);
    for (const name of [STREAMS.sessions, STREAMS.results, STREAMS.traces, "KV_polar_nodes", "OBJ_polar_blobs"]) {
      expect((await jsm.streams.info(name)).config.num_replicas, name).toBe(3);
    }
  });

  it("a NATS node killed and a gateway cut off mid-task: every result and trace exactly once", async () => {
    const n = 16;
    await request(client, SUBJECTS.api.submit, {
      task_id: "cluster",
      instruction: "x",
      num_samples: n,
      timeout_seconds: 120,
      runtime: { backend: "local", kwargs: { isolation: "none" } },
      agent: { harness: "shell", custom_shell: { command: `${CALL}; sleep 1; ${CALL}` } },
    });
    const status = () => request<TaskStatus>(client, SUBJECTS.api.get, { task_id: "cluster", with_results: true }, { timeoutMs: 5000 }).catch(() => undefined);
    // Wait until both gateways run sessions and some have finished.
    for (const deadline = Date.now() + 30_000; ; ) {
      const st = await status();
      const nodesRunning = new Set(st?.sessions.filter((s) => s.status === "RUNNING").map((s) => s.node_id));
      if (st && st.results.length >= 2 && nodesRunning.has("gw-c1") && nodesRunning.has("gw-c2")) break;
      if (Date.now() > deadline) throw new Error(`the task did not get going: ${JSON.stringify(st?.sessions.map((s) => [s.status, s.node_id]))}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // gw-c1's preferred server dies; then gw-c2 loses NATS for good, its sessions still running.
    nodes[1].proc.kill("SIGKILL");
    await nodes[1].exited;
    await conns[2].close();
    let st: TaskStatus | undefined;
    for (const deadline = Date.now() + 45_000; st?.status !== "completed"; ) {
      if (Date.now() > deadline) throw new Error(`task not completed: ${JSON.stringify({ ...st, results: undefined, sessions: st?.sessions.map((s) => [s.status, s.attempt, s.node_id]) })}`);
      await new Promise((r) => setTimeout(r, 250));
      st = await status();
    }
    expect(st!.results).toHaveLength(n);
    expect(new Set(st!.results.map((r) => r.session_id)).size).toBe(n);
    expect(st!.results.every((r) => r.status === "COMPLETED")).toBe(true);
    // Some sessions of the cut-off gateway ran again elsewhere: later attempts, on gw-c1.
    expect(st!.results.some((r) => r.attempt > 1 && r.node_id === "gw-c1")).toBe(true);

    // Every trace exactly once on the replicated traces stream (the trace counts the supervisor recorded).
    const js = jetstream(client);
    // (retried: right after a node died the consumer's placement may time out once)
    let consumer: Awaited<ReturnType<typeof js.consumers.get>> | undefined;
    for (let i = 0; !consumer; i++) {
      consumer = await js.consumers.get(STREAMS.traces, { filter_subjects: SUBJECTS.traceFilter("cluster"), deliver_policy: DeliverPolicy.All }).catch((err) => {
        if (i >= 5) throw err;
        return undefined;
      });
    }
    const expected = st!.sessions.reduce((a, s) => a + s.trace_count, 0);
    expect(expected).toBeGreaterThanOrEqual(n);
    const seen: string[] = [];
    const blobs = { blobs: (await import("@nats-io/obj").then((m) => new m.Objm(client).open("polar_blobs"))) };
    while (seen.length < expected) {
      const m = await consumer.next({ expires: 5000 });
      if (!m) break;
      const t = (await readDurable(blobs, m.data, m.headers)) as { session_id: string; trace_index: number; attempt: number };
      seen.push(`${t.session_id}/${t.trace_index}`);
    }
    expect(await consumer.next({ expires: 1000 })).toBeNull();
    expect(seen).toHaveLength(expected);
    expect(new Set(seen).size).toBe(expected);
  }, 120_000);
});
