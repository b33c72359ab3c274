/**
 * Liveness: the supervisor's node monitor reads heartbeats and takes a node
 * whose beats stopped for gone (jitter- and outage-tolerant, injected clock);
 * a `polar gateway` process killed with SIGKILL has its sessions released
 * within seconds (lease expired, delivery NAKed), so they run elsewhere long
 * before ack_wait (30 s), exactly once, and the lease history shows the dead
 * node's attempt ended before the next one began.
 */
import { spawn } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Liveness } from "../src/actors/supervisor/node-monitor.ts";
import { openInfra } from "../src/nats/infra.ts";
import { request, serveRequests } from "../src/nats/messages.ts";
import { decode, encode } from "../src/protocol/codec.ts";
import { silentLogger } from "../src/util/log.ts";
import { SessionLease } from "../src/protocol/schemas.ts";
import { leaseKey, STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import { ONE_CALL, shellTask, taskStatus, waitFor, waitTaskDone } from "./helpers/gateway.ts";
import { startTestSystem, TEST_INFRA, type TestSystem } from "./helpers/system.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

describe("Liveness (injected clock)", () => {
  it("a node is gone after missing 3 of its intervals, not on one late beat", () => {
    let now = 0;
    const l = new Liveness(() => now, { missedBeats: 3, minSilenceMs: 1500, defaultIntervalMs: 5000 });
    l.beat("a", 1000);
    l.beat("b", 1000);
    for (const t of [900, 2100, 2950]) {
      now = t; // b beats with jitter, a is silent after t=0
      l.beat("b");
      expect(l.gone()).toEqual([]);
    }
    now = 3001;
    expect(l.gone()).toEqual(["a"]);
    expect(l.gone()).toEqual([]); // reported once
    expect(l.known).toEqual(["b"]);
  });

  it("uses the default interval until a node says its own, and never less than the minimum silence", () => {
    let now = 0;
    const l = new Liveness(() => now, { missedBeats: 3, minSilenceMs: 1500, defaultIntervalMs: 5000 });
    l.beat("slow");
    l.beat("fast", 100);
    now = 1400;
    expect(l.gone()).toEqual([]);
    now = 1501;
    expect(l.gone()).toEqual(["fast"]);
    now = 15_001;
    expect(l.gone()).toEqual(["slow"]);
  });

  it("after its own reconnection the monitor counts silence from then (an outage is not a death)", () => {
    let now = 0;
    const l = new Liveness(() => now, { missedBeats: 3, minSilenceMs: 1500, defaultIntervalMs: 5000 });
    l.beat("a", 500);
    now = 10_000;
    l.reconnected();
    expect(l.gone()).toEqual([]);
    now = 11_400;
    expect(l.gone()).toEqual([]);
    now = 11_501;
    expect(l.gone()).toEqual(["a"]);
  });

  it("a node that left on its own is forgotten", () => {
    let now = 0;
    const l = new Liveness(() => now);
    l.beat("a", 100);
    l.forget("a");
    now = 60_000;
    expect(l.gone()).toEqual([]);
  });
});

describe("a gateway killed with SIGKILL", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor({ liveness: { checkEveryMs: 200 } });
  });
  afterAll(async () => {
    await sys?.stop();
  });

  it("its sessions are released within seconds, complete elsewhere exactly once, and never run on two gateways at once", async () => {
    // ack_wait 60 s: a release that waited for it could not finish within the deadlines below.
    const infra = { dispatchAckWaitMs: 60_000, maxDeliver: 5, nodeTtlMs: 10_000 };
    const dir = await mkdtemp(join(tmpdir(), "polar-gw-"));
    const cfg = join(dir, "gw.json");
    await writeFile(cfg, JSON.stringify({ gateway: { pool: "kill9", heartbeat_interval_ms: 300 }, infra: { dispatch_ack_wait_ms: 60_000, max_deliver: 5, node_ttl_ms: 10_000 } }));
    // Every write to polar_leases, in order, with when this test saw it.
    const kv = await openInfra(sys.client, TEST_INFRA);
    const history: Array<{ key: string; op: string; lease?: SessionLease; seenAt: number }> = [];
    const watch = await kv.leases.watch();
    void (async () => {
      for await (const e of watch) history.push({ key: e.key, op: e.operation, lease: e.operation === "PUT" ? SessionLease.parse(decode(e.value)) : undefined, seenAt: Date.now() });
    })();
    const child = spawn(
      process.execPath,
      [join(ROOT, "bin/polar.js"), "gateway", "--nats", sys.nats.url, "--upstream", sys.upstream.url, "--node-id", "gw-killed", "-c", cfg],
      { stdio: ["ignore", "ignore", "ignore"], env: { ...process.env, POLAR_LOG_LEVEL: "warn" } },
    );
    const exited = new Promise((r) => child.once("exit", r));
    try {
      await request(sys.client, SUBJECTS.api.submit, shellTask("killed-9", `${ONE_CALL} && sleep 3 && ${ONE_CALL}`, { pool: "kill9", num_samples: 2 }));
      await waitFor("both sessions RUNNING on gw-killed", async () => {
        const ss = (await taskStatus(sys, "killed-9")).sessions;
        return ss.length === 2 && ss.every((s) => s.status === "RUNNING" && s.node_id === "gw-killed");
      }, 120_000, 100); // a polar process starts slowly on a loaded machine
      // The rescuer is up before the kill (nothing is left in the queue for it until then).
      await sys.startGateway({ nodeId: "gw-rescuer", pool: "kill9", infra });
    } finally {
      child.kill("SIGKILL");
      await exited;
    }
    const killedAt = Date.now();
    // Not RUNNING on the dead node until ack_wait: released after a few missed heartbeats (5 s at least).
    await waitFor("no session shown RUNNING on the killed node", async () => {
      const ss = (await taskStatus(sys, "killed-9")).sessions;
      return ss.every((s) => !(s.status === "RUNNING" && s.node_id === "gw-killed"));
    }, 20_000, 100);
    const st = await waitTaskDone(sys, "killed-9", 40_000); // both attempts done well before the 60 s ack_wait
    expect(st.results.map((r) => [r.status, r.attempt, r.node_id])).toEqual([
      ["COMPLETED", 2, "gw-rescuer"],
      ["COMPLETED", 2, "gw-rescuer"],
    ]);
    for (const r of st.results) expect(r.completion_session?.completions.map((c) => c.attempt)).toEqual([2, 2]);
    // Exactly once: one SessionResult per session on POLAR_RESULTS.
    const subject = SUBJECTS.result("killed-9");
    const info = await kv.jsm.streams.info(STREAMS.results, { subjects_filter: subject });
    expect(info.state.subjects?.[subject]).toBe(2);
    // Never on two gateways at once: for each session, attempt 1's lease (gw-killed) was expired
    // before attempt 2 (gw-rescuer) took it, and attempt 2 started after the kill.
    await watch.stop();
    for (const r of st.results) {
      const h = history.filter((e) => e.key === leaseKey(r.session_id));
      const first2 = h.findIndex((e) => e.lease?.attempt === 2);
      const last1 = h.findLastIndex((e) => e.lease?.attempt === 1);
      expect(h[last1].lease).toMatchObject({ node_id: "gw-killed", attempt: 1 });
      expect(h[first2].lease).toMatchObject({ node_id: "gw-rescuer", attempt: 2 });
      expect(last1).toBeLessThan(first2);
      expect(h.slice(last1 + 1, first2).map((e) => e.op)).toContain("DEL");
      expect(Date.parse(h[first2].lease!.init_at)).toBeGreaterThanOrEqual(killedAt - 50);
      expect(Date.parse(h[first2].lease!.init_at)).toBeGreaterThan(Date.parse(h[last1].lease!.updated_at));
    }
  }, 200_000);
});

describe("a node whose heartbeats stop but that still answers", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor({ liveness: { checkEveryMs: 200, minSilenceMs: 1000 } });
  });
  afterAll(async () => {
    await sys?.stop();
  });

  it("is kept while it answers the monitor's ping, and declared gone once it does not", async () => {
    const left: Array<{ node_id: string; at: number }> = [];
    const sub = sys.client.subscribe(SUBJECTS.event("node.left"), {
      callback: (_e, m) => void left.push({ ...(decode(m.data) as { node_id: string }), at: Date.now() }),
    });
    // A node that beats twice (interval 200 ms) and then goes silent, its loop "busy", but answers pings.
    const node = "silent-but-alive";
    let pings = 0;
    const responder = serveRequests(sys.client, SUBJECTS.nodePing(node), async () => (pings++, { node_id: node, ok: true }), silentLogger());
    const beat = () => sys.client.publish(SUBJECTS.heartbeat(node), encode({ node_id: node, metrics: {}, sent_at: new Date().toISOString(), interval_ms: 200 }));
    beat();
    await new Promise((r) => setTimeout(r, 200));
    beat();
    await sys.client.flush();
    // Silent for 4 s: 20 missed beats; every check that finds it silent pings it, and it answers.
    await waitFor("a ping", async () => pings > 0, 10_000);
    await new Promise((r) => setTimeout(r, 4000));
    expect(pings).toBeGreaterThan(1);
    expect(left.filter((e) => e.node_id === node)).toEqual([]);
    // Now nobody answers: gone within a few seconds (no responder fails the ping at once).
    await responder.drain();
    const t0 = Date.now();
    await waitFor("node.left", async () => left.some((e) => e.node_id === node), 10_000);
    expect(left.find((e) => e.node_id === node)!.at - t0).toBeLessThan(5000);
    sub.unsubscribe();
  });
});

