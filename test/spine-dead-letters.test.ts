/**
 * A session whose every attempt dies (the gateway crashes each time) must
 * still end: after the last delivery the supervisor records an ERROR result
 * and clears the work queue, instead of waiting out the task budget.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDispatchConsumer, openInfra } from "../src/nats/infra.ts";
import { request } from "../src/nats/messages.ts";
import type { TaskStatus } from "../src/protocol/schemas.ts";
import { STREAMS, SUBJECTS, dispatchConsumer } from "../src/protocol/subjects.ts";
import { startTestSystem, TEST_INFRA, type TestSystem } from "./helpers/system.ts";

describe("sessions that exhaust their deliveries", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor();
  });
  afterAll(async () => {
    await sys?.stop();
  });

  it("get an ERROR result as soon as the last attempt is lost", async () => {
    const infra = await openInfra(sys.client, TEST_INFRA);
    await ensureDispatchConsumer(infra.jsm, "default", { ...TEST_INFRA, maxDeliver: 2 });
    const t0 = Date.now();
    await request(sys.client, SUBJECTS.api.submit, {
      task_id: "doomed",
      instruction: "x",
      timeout_seconds: 600,
      agent: { harness: "shell", custom_shell: { command: "true" } },
      runtime: { backend: "local" },
    });
    // A "gateway" that takes the session and dies without acking, twice.
    const consumer = await infra.js.consumers.get(STREAMS.sessions, dispatchConsumer("default"));
    for (let attempt = 1; attempt <= 2; attempt++) {
      const m = await consumer.next({ expires: 10_000 });
      expect(m?.info.deliveryCount).toBe(attempt);
    }
    // Gateways keep pulling; the server notices the exhausted message on the next pull.
    expect(await consumer.next({ expires: 5000 })).toBeNull();
    let st: TaskStatus | undefined;
    for (let i = 0; i < 100 && st?.status !== "completed"; i++) {
      await new Promise((r) => setTimeout(r, 200));
      st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "doomed" });
    }
    expect(st?.status).toBe("completed");
    expect(Date.now() - t0).toBeLessThan(20_000); // not the 600 s budget
    expect(st!.results[0]).toMatchObject({ status: "ERROR", error: "no gateway finished the session after 2 attempts", attempt: 2 });
    const info = await infra.jsm.streams.info(STREAMS.sessions);
    expect(info.state.messages).toBe(0);
  });
});
