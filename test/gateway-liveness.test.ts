/**
 * Liveness: the supervisor's node monitor reads heartbeats and takes a node
 * whose beats stopped for gone (jitter- and outage-tolerant, injected clock);
 * a gateway killed with SIGKILL has its sessions released at once (lease
 * expired, delivery NAKed), so they run elsewhere long before ack_wait (30 s).
 */
import { spawn } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Liveness } from "../src/actors/supervisor/node-monitor.ts";
import { request } from "../src/nats/messages.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { ONE_CALL, shellTask, taskStatus, waitFor, waitTaskDone } from "./helpers/gateway.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

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

  it("its session is released at once and completes elsewhere as attempt 2, long before ack_wait", async () => {
    const infra = { dispatchAckWaitMs: 30_000, maxDeliver: 5, nodeTtlMs: 10_000 };
    const dir = await mkdtemp(join(tmpdir(), "polar-gw-"));
    const cfg = join(dir, "gw.json");
    await writeFile(cfg, JSON.stringify({ gateway: { pool: "kill9", heartbeat_interval_ms: 300 }, infra: { dispatch_ack_wait_ms: 30_000, max_deliver: 5, node_ttl_ms: 10_000 } }));
    const child = spawn(
      process.execPath,
      [join(ROOT, "bin/polar.js"), "gateway", "--nats", sys.nats.url, "--upstream", sys.upstream.url, "--node-id", "gw-killed", "-c", cfg],
      { stdio: ["ignore", "ignore", "ignore"], env: { ...process.env, POLAR_LOG_LEVEL: "warn" } },
    );
    const exited = new Promise((r) => child.once("exit", r));
    try {
      await request(sys.client, SUBJECTS.api.submit, shellTask("killed-9", `${ONE_CALL} && sleep 3 && ${ONE_CALL}`, { pool: "kill9" }));
      await waitFor("the session RUNNING on gw-killed", async () => {
        const s = (await taskStatus(sys, "killed-9")).sessions[0];
        return s?.status === "RUNNING" && s.node_id === "gw-killed";
      }, 120_000, 100); // a polar process starts slowly on a loaded machine
    } finally {
      child.kill("SIGKILL");
      await exited;
    }
    const killedAt = Date.now();
    await sys.startGateway({ nodeId: "gw-rescuer", pool: "kill9", infra });
    // Not RUNNING on the dead node for the ack_wait: released within a few heartbeats.
    await waitFor("the session no longer shown RUNNING on the killed node", async () => {
      const s = (await taskStatus(sys, "killed-9")).sessions[0];
      return !(s.status === "RUNNING" && s.node_id === "gw-killed");
    }, 10_000, 100);
    const st = await waitTaskDone(sys, "killed-9", 25_000);
    const elapsed = Date.now() - killedAt;
    const r = st.results[0];
    expect([r.status, r.attempt, r.node_id]).toEqual(["COMPLETED", 2, "gw-rescuer"]);
    expect(r.completion_session?.completions.map((c) => c.attempt)).toEqual([2, 2]);
    expect(elapsed).toBeLessThan(25_000); // the ack_wait alone is 30 s
  }, 200_000);
});
