/**
 * What waits, and where, is visible (real nats-server, supervisor, a gateway
 * with the local runtime, the sim, the `polar` CLI as a process):
 * - INIT is a mailbox: with one INIT worker and room for two more, a slow
 *   prepare step queues sessions there; `init_queue_depth` is the real depth,
 *   bounded by the capacity, in the gateway's metrics and in its heartbeats;
 * - `polar status` names a pool whose sessions wait and that no live gateway
 *   serves, and lists each node with its queue depths.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import type { SystemStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { spawnPolar } from "./helpers/cli-process.ts";
import { waitTaskDone } from "./helpers/gateway.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const CALL = `curl -sf -o /dev/null -H "authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json' -d '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}' "$OPENAI_BASE_URL/chat/completions"`;

function task(task_id: string, pool: string, num_samples: number, prepare: unknown[] = []) {
  return {
    task_id,
    instruction: "x",
    pool,
    num_samples,
    timeout_seconds: 120,
    runtime: { backend: "local", kwargs: { isolation: "none" }, prepare },
    agent: { harness: "shell", custom_shell: { command: CALL } },
  };
}

describe("stage depths and unserved pools", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor();
  });
  afterAll(async () => {
    await sys?.stop();
  });

  it("a slow INIT queues sessions in INIT's mailbox: the real depth, bounded, in the metrics and the heartbeats", async () => {
    const gw = await sys.startGateway({
      nodeId: "gw-depth",
      pool: "depth",
      limits: { maxInitWorkers: 1, initQueueCapacity: 2, readyCapacity: 2, maxRunWorkers: 4, maxPostrunWorkers: 4 },
    });
    let maxLocal = 0;
    const sample = setInterval(() => {
      maxLocal = Math.max(maxLocal, gw.metrics().init_queue_depth);
    }, 5);
    const reported: number[] = [];
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const s = await request<SystemStatus>(sys.client, SUBJECTS.api.status, {}).catch(() => undefined);
        const n = s?.nodes.find((x) => x.node_id === "gw-depth");
        if (n) reported.push(n.metrics.init_queue_depth);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    try {
      await request(sys.client, SUBJECTS.api.submit, task("slow-init", "depth", 6, [{ type: "exec", command: "sleep 1.5" }]));
      const st = await waitTaskDone(sys, "slow-init", 90_000);
      expect(st.results.map((r) => [r.status, r.error])).toEqual(st.results.map(() => ["COMPLETED", null]));
      expect(st.results).toHaveLength(6);
    } finally {
      clearInterval(sample);
      polling = false;
      await poll;
    }
    expect(maxLocal).toBe(2); // sessions did wait in INIT, never more than its capacity
    expect(Math.max(...reported)).toBeGreaterThanOrEqual(1); // the heartbeats carry the real depth
    expect(Math.max(...reported)).toBeLessThanOrEqual(2);
    await sys.stopGateways();
  }, 120_000);

  it("`polar status` names a pool nobody serves and lists each node with its queue depths", async () => {
    await sys.startGateway({ nodeId: "gw-status", pool: "served" });
    await request(sys.client, SUBJECTS.api.submit, task("unserved", "nobody-here", 3));
    const cli = spawnPolar(["status", "--nats", sys.nats.url]);
    expect(await cli.exited).toBe(0);
    const out = cli.output();
    expect(out).toContain("pool nobody-here: 3 sessions waiting and NO live gateway serves it");
    expect(out).not.toMatch(/pool served:/);
    expect(out).toMatch(/gw-status (healthy|UNHEALTHY) pool=served init=\d+\/\d+ init_queue=\d+ ready=\d+ run=\d+\/\d+ postrun=\d+\/\d+ postrun_queue=\d+ /);
    const json = spawnPolar(["status", "--nats", sys.nats.url, "--json"]);
    expect(await json.exited).toBe(0);
    const s = JSON.parse(json.output()) as SystemStatus;
    expect(s.unserved_pools).toEqual([{ pool: "nobody-here", pending_sessions: 3 }]);
    await request(sys.client, SUBJECTS.api.cancel, { task_id: "unserved" });
    await sys.stopGateways();
  }, 120_000);
});
