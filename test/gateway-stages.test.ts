/**
 * Stages as mailboxes over the real system (nats-server, supervisor, a
 * gateway with the local runtime): a slow POSTRUN stops the pulling, so the
 * sessions a gateway holds (each with a live sandbox) stay within the sum of
 * its stage capacities instead of growing with the queue; the depths in the
 * node metrics are the real ones.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { ONE_CALL, shellTask, waitTaskDone } from "./helpers/gateway.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

// ONE_CALL: curl starts in milliseconds, so RUN is fast and POSTRUN the bottleneck.

describe("gateway stages", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor();
  });
  afterAll(async () => {
    await sys?.stop();
  });

  it("a slow POSTRUN bounds the sessions held (live sandboxes) to the stage capacities", async () => {
    const limits = { maxInitWorkers: 1, maxRunWorkers: 1, readyCapacity: 1, maxPostrunWorkers: 1, postrunQueueCapacity: 1 };
    const bound = 1 + 1 + 1 + 1 + 1; // INIT worker, READY, RUN worker, POSTRUN queue, POSTRUN worker
    const gw = await sys.startGateway({ nodeId: "gw-slow-post", limits });
    let maxHeld = 0;
    let maxPostQueue = 0;
    const sample = setInterval(() => {
      maxHeld = Math.max(maxHeld, gw.pipeline.size);
      maxPostQueue = Math.max(maxPostQueue, gw.metrics().postrun_queue_depth);
    }, 5);
    try {
      await request(
        sys.client,
        SUBJECTS.api.submit,
        shellTask("slow-postrun", ONE_CALL, { num_samples: 8, evaluator: { strategy: "command", config: { command: "sleep 1" } } }),
      );
      const st = await waitTaskDone(sys, "slow-postrun", 40_000);
      expect(st.status).toBe("completed");
      expect(st.results).toHaveLength(8);
      expect(st.results.map((r) => [r.status, r.attempt, r.error])).toEqual(st.results.map(() => ["COMPLETED", 1, null]));
    } finally {
      clearInterval(sample);
    }
    expect(maxHeld).toBeLessThanOrEqual(bound);
    expect(maxHeld).toBeGreaterThanOrEqual(3); // the pipeline did fill up
    expect(maxPostQueue).toBe(1); // a real depth, never above its capacity
    await sys.stopGateways();
  });

  it("shared_init_run: INIT runs on a RUN worker (no INIT pool), staged: INIT has its own workers", async () => {
    const limits = { maxInitWorkers: 3, maxRunWorkers: 2, readyCapacity: 2, maxPostrunWorkers: 2 };
    const runtime = { backend: "local", prepare: [{ type: "exec", command: "sleep 0.3" }] };
    const seen = async (nodeId: string, sharedInitRun: boolean, taskId: string) => {
      const gw = await sys.startGateway({ nodeId, limits: { ...limits, sharedInitRun } });
      const max = { init: 0, run: 0 };
      const sample = setInterval(() => {
        const m = gw.metrics();
        max.init = Math.max(max.init, m.init_inflight);
        max.run = Math.max(max.run, m.run_inflight);
      }, 5);
      try {
        await request(sys.client, SUBJECTS.api.submit, shellTask(taskId, ONE_CALL, { num_samples: 8, runtime }));
        const st = await waitTaskDone(sys, taskId, 40_000);
        expect(st.results.map((r) => r.status)).toEqual(st.results.map(() => "COMPLETED"));
        expect(st.results.every((r) => r.timing.prepare_ms >= 250)).toBe(true); // the prepare ran in both modes
      } finally {
        clearInterval(sample);
        await sys.stopGateways();
      }
      return max;
    };
    const shared = await seen("gw-shared", true, "shared-init-run");
    expect(shared.init).toBe(0); // no INIT worker was ever used
    expect(shared.run).toBe(2); // INIT and RUN together never above the RUN workers
    const staged = await seen("gw-staged", false, "staged-init-run");
    expect(staged.init).toBeGreaterThanOrEqual(2); // INIT worked beside RUN
    expect(staged.init).toBeLessThanOrEqual(3);
  });
});
