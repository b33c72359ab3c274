/**
 * Sessions whose gateways go away. A gateway that leaves (graceful stop) with
 * full stages stops promptly and hands its sessions back to the queue, and
 * another gateway finishes them as new attempts. A session whose every
 * attempt dies still ends: after the last delivery the supervisor records an
 * ERROR result and clears the work queue, instead of waiting out the budget.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDispatchConsumer, openInfra } from "../src/nats/infra.ts";
import { request } from "../src/nats/messages.ts";
import type { TaskStatus } from "../src/protocol/schemas.ts";
import { STREAMS, SUBJECTS, dispatchConsumer } from "../src/protocol/subjects.ts";
import { startTestSystem, TEST_INFRA, type TestSystem } from "./helpers/system.ts";

describe("gateways going away", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor();
  });
  afterAll(async () => {
    await sys?.stop();
  });

  it("stops promptly with READY full and hands its sessions back to the queue", async () => {
    const gw = await sys.startGateway({ nodeId: "gw-leaving", limits: { maxInitWorkers: 1, maxRunWorkers: 1, readyCapacity: 1 } });
    await request(sys.client, SUBJECTS.api.submit, {
      task_id: "handover",
      instruction: "x",
      num_samples: 3,
      timeout_seconds: 60,
      runtime: { backend: "local" },
      agent: { harness: "shell", custom_shell: { command: "sleep 2" } },
    });
    // Wait until one session runs and one waits in READY (the pull loop is then blocked on READY room).
    for (let i = 0; i < 100; i++) {
      const m = gw.metrics();
      if (m.run_inflight === 1 && m.ready_depth === 1) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(gw.metrics()).toMatchObject({ run_inflight: 1, ready_depth: 1 });
    const t0 = Date.now();
    await sys.stopGateways();
    expect(Date.now() - t0).toBeLessThan(5000);
    await sys.startGateway({ nodeId: "gw-taking-over" });
    let st: TaskStatus | undefined;
    for (let i = 0; i < 150 && st?.status !== "completed"; i++) {
      await new Promise((r) => setTimeout(r, 200));
      st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "handover", with_results: true });
    }
    expect(st?.status).toBe("completed");
    expect(new Set(st!.results.map((r) => r.node_id))).toEqual(new Set(["gw-taking-over"]));
    // The two sessions the leaving gateway held come back as a second attempt; none ended ERROR for the leave.
    expect(st!.results.map((r) => r.attempt).sort()).toEqual([1, 2, 2]);
    expect(st!.results.every((r) => r.error !== "gateway stopping")).toBe(true);
  });

  it("a session that exhausts its deliveries gets an ERROR result as soon as the last attempt is lost", async () => {
    const infra = await openInfra(sys.client, TEST_INFRA);
    // Its own pool, so no gateway of this file takes it and its consumer gives up after 2 deliveries.
    await ensureDispatchConsumer(infra.jsm, "doomed", { ...TEST_INFRA, maxDeliver: 2 });
    const t0 = Date.now();
    await request(sys.client, SUBJECTS.api.submit, {
      task_id: "doomed",
      instruction: "x",
      timeout_seconds: 600,
      agent: { harness: "shell", custom_shell: { command: "true" } },
      runtime: { backend: "local" },
      pool: "doomed",
    });
    // A "gateway" that takes the session and dies without acking, twice.
    const consumer = await infra.js.consumers.get(STREAMS.sessions, dispatchConsumer("doomed"));
    for (let attempt = 1; attempt <= 2; attempt++) {
      const m = await consumer.next({ expires: 10_000 });
      expect(m?.info.deliveryCount).toBe(attempt);
    }
    // Gateways keep pulling; the server notices the exhausted message on the next pull.
    expect(await consumer.next({ expires: 5000 })).toBeNull();
    let st: TaskStatus | undefined;
    for (let i = 0; i < 100 && st?.status !== "completed"; i++) {
      await new Promise((r) => setTimeout(r, 200));
      st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "doomed", with_results: true });
    }
    expect(st?.status).toBe("completed");
    expect(Date.now() - t0).toBeLessThan(20_000); // not the 600 s budget
    expect(st!.results[0]).toMatchObject({ status: "ERROR", error: "no gateway finished the session after 2 attempts", attempt: 2 });
    const info = await infra.jsm.streams.info(STREAMS.sessions);
    expect(info.state.messages).toBe(0);
  });

});
