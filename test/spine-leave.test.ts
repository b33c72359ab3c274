/**
 * A gateway that leaves (graceful stop) while its stages are full: it stops
 * promptly, its sessions go back to the queue (not ERROR), and another
 * gateway finishes them as new attempts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import type { TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

describe("a gateway leaving", () => {
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
      st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "handover" });
    }
    expect(st?.status).toBe("completed");
    expect(new Set(st!.results.map((r) => r.node_id))).toEqual(new Set(["gw-taking-over"]));
    // The two sessions the leaving gateway held come back as a second attempt; none ended ERROR for the leave.
    expect(st!.results.map((r) => r.attempt).sort()).toEqual([1, 2, 2]);
    expect(st!.results.every((r) => r.error !== "gateway stopping")).toBe(true);
  });
});
