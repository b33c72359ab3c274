/**
 * Budgets as the reference counts them, over the real system (nats-server,
 * supervisor, a gateway with the local runtime, the sim):
 * - a session's budget counts from its INIT, so sessions that wait in the
 *   queue longer than `timeout_seconds` (many sessions, few run workers) are
 *   never given TIMEOUT, and every one of them returns its real result;
 * - `queue_timeout_seconds` ends a session no gateway started in time as
 *   TIMEOUT, and a gateway that arrives later does not run it.
 */
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import { jetstreamManager } from "@nats-io/jetstream";
import type { TaskStatus } from "../src/protocol/schemas.ts";
import { dispatchConsumer, STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import { waitFor, waitTaskDone } from "./helpers/gateway.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

/** One real model call through the session's proxy (a session without any is an ERROR by design). */
const CALL = `curl -sf -o /dev/null -H "authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json' -d '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}' "$OPENAI_BASE_URL/chat/completions"`;

function task(task_id: string, pool: string, command: string, extra: Record<string, unknown> = {}) {
  return {
    task_id,
    instruction: "x",
    pool,
    num_samples: 1,
    timeout_seconds: 60,
    runtime: { backend: "local", kwargs: { isolation: "none" } },
    agent: { harness: "shell", custom_shell: { command } },
    ...extra,
  };
}

const byStatus = (st: TaskStatus) => st.results.reduce<Record<string, number>>((acc, r) => ((acc[r.status] = (acc[r.status] ?? 0) + 1), acc), {});

describe("session budgets and queue timeouts", () => {
  let sys: TestSystem;
  let marks: string;
  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor({ sweepIntervalMs: 250, resultGraceMs: 1000 });
    marks = await mkdtemp(join(tmpdir(), "polar-budget-"));
  });
  afterAll(async () => {
    await sys?.stop();
    await rm(marks, { recursive: true, force: true });
  });

  it("sessions queued longer than timeout_seconds are not timed out: every one returns its real result", async () => {
    // The sizes: 4 run workers, 60 sessions of ~2.5 s, timeout_seconds 20: the last ones wait
    // far longer than their budget before their INIT (the sweep used to give 24 of them TIMEOUT).
    const timeoutS = 20;
    await sys.startGateway({
      nodeId: "gw-budget",
      pool: "budget",
      limits: { maxInitWorkers: 1, initQueueCapacity: 0, readyCapacity: 1, maxRunWorkers: 4, maxPostrunWorkers: 2 },
    });
    const started = Date.now();
    await request(sys.client, SUBJECTS.api.submit, task("queued-budget", "budget", `${CALL} && sleep 2.5`, { num_samples: 60, timeout_seconds: timeoutS }));
    const st = await waitTaskDone(sys, "queued-budget", 150_000);
    const wall = (Date.now() - started) / 1000;
    // The point of the test: some sessions waited in the queue longer than their budget.
    expect(wall).toBeGreaterThan(timeoutS * 1.5);
    expect(st.status).toBe("completed");
    expect(st.results).toHaveLength(60);
    expect(byStatus(st)).toEqual({ COMPLETED: 60 });
    for (const r of st.results) {
      expect(r.node_id).toBe("gw-budget");
      expect(r.attempt).toBe(1);
      expect(r.error).toBeNull();
      expect(r.trajectory.traces.length).toBeGreaterThan(0);
    }
    expect(new Set(st.results.map((r) => r.session_id)).size).toBe(60);
    await sys.stopGateways();
  }, 180_000);

  it("queue_timeout_seconds: a session no gateway started in time is TIMEOUT, and a gateway arriving later does not run it", async () => {
    const mark = `${CALL} && touch "${marks}/$POLAR_SESSION_ID"`;
    await request(sys.client, SUBJECTS.api.submit, task("queue-late", "late", mark, { num_samples: 3, queue_timeout_seconds: 1 }));
    const st = await waitTaskDone(sys, "queue-late", 40_000);
    expect(st.status).toBe("completed");
    expect(byStatus(st)).toEqual({ TIMEOUT: 3 });
    for (const r of st.results) {
      expect(r.error).toBe("no gateway started the session within queue_timeout_seconds (1 s)");
      expect(r.node_id).toBeNull();
    }

    // A gateway for the pool arrives; it runs a task submitted now, and not the timed-out ones.
    await sys.startGateway({ nodeId: "gw-late", pool: "late" });
    await request(sys.client, SUBJECTS.api.submit, task("queue-fresh", "late", mark, { num_samples: 2, queue_timeout_seconds: 120 }));
    const fresh = await waitTaskDone(sys, "queue-fresh", 60_000);
    expect(byStatus(fresh)).toEqual({ COMPLETED: 2 });
    const jsm = await jetstreamManager(sys.client);
    await waitFor("the pool's queue to be empty", async () => {
      const ci = await jsm.consumers.info(STREAMS.sessions, dispatchConsumer("late"));
      return ci.num_pending === 0 && ci.num_ack_pending === 0;
    }, 20_000);
    const ran = (await readdir(marks)).sort();
    expect(ran).toEqual(fresh.results.map((r) => r.session_id).sort());
    const after = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "queue-late", with_results: true });
    expect(byStatus(after)).toEqual({ TIMEOUT: 3 });
    await sys.stopGateways();
  }, 120_000);
});
