/**
 * Evaluator actors: a remote evaluator (`fresh_command`) runs on `polar
 * evaluator` processes, not in the gateway. POSTRUN collects from the
 * agent's runtime, publishes the request on POLAR_EVALS and waits; an
 * evaluator evaluates in a fresh runtime and answers. An evaluator killed
 * with SIGKILL mid-evaluation leaves the request to another; with no
 * evaluator at all, the session budget bounds the wait.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import type { SessionResult, SystemStatus, TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { reapLocalProcesses } from "../src/runtimes/reaper.ts";
import { spawnEvaluator, type EvaluatorProcess } from "./helpers/evaluator-process.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const dir = mkdtempSync(join(tmpdir(), "evaluator-actor-"));
const config = join(dir, "polar.json");
writeFileSync(config, JSON.stringify({ evaluator: { heartbeat_interval_ms: 300 }, infra: { eval_ack_wait_ms: 1500 } }));

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  let lastErr: unknown;
  for (;;) {
    // A poll that fails (a status request timing out on a loaded machine) only means "not yet".
    const v = await f().catch((err: unknown) => {
      lastErr = err;
      return undefined;
    });
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${lastErr ? ` (last poll: ${(lastErr as Error).message})` : ""}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const CLIENT = fileURLToPath(new URL("../config/examples/chat-client.mjs", import.meta.url));
// One model call through the proxy (so there is a trajectory), then the "fix": right for sample 0 only.
const AGENT = `node ${JSON.stringify(CLIENT)} && if [ "$POLAR_SAMPLE_INDEX" = 0 ]; then echo fixed; else echo broken; fi > answer.txt`;

function task(id: string, command: string, extra: Record<string, unknown> = {}) {
  return {
    task_id: id,
    instruction: "fix it",
    timeout_seconds: 60,
    runtime: { backend: "local" },
    agent: { harness: "shell", custom_shell: { command: AGENT, env: { TURNS: "1" } } },
    // The fresh runtime has no answer.txt: what the agent wrote arrives only through the collected output.
    evaluator: { strategy: "fresh_command", refresh_runtime: true, config: { collect_command: "cat answer.txt", command } },
    ...extra,
  };
}

async function finished(sys: TestSystem, taskId: string): Promise<SessionResult[]> {
  const st = await until(`task ${taskId}`, async () => {
    const s = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: taskId, with_results: true });
    return s.status === "completed" ? s : undefined;
  }, 45_000);
  return [...st.results].sort((a, b) => Number(a.metadata.sample_index ?? 0) - Number(b.metadata.sample_index ?? 0));
}

const evaluation = (r: SessionResult) => r.trajectory.metadata.evaluation as Record<string, unknown>;

describe("evaluator actors", () => {
  let sys: TestSystem;
  const procs: EvaluatorProcess[] = [];
  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor();
    await sys.startGateway({ nodeId: "gw-noeval", evaluator: false });
  });
  afterAll(async () => {
    for (const p of procs) await p.stop();
    await reapLocalProcesses("ev-doomed").catch(() => 0);
    await sys?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("evaluates on an evaluator process in a fresh runtime and shows it in status", async () => {
    procs.push(await spawnEvaluator(sys.nats.url, "ev-a", ["-c", config]));
    await request(sys.client, SUBJECTS.api.submit, task("remote", 'test ! -e answer.txt && grep -qx fixed "$POLAR_EVAL_INPUT"', { num_samples: 2 }));
    const results = await finished(sys, "remote");
    expect(results.map((r) => [r.status, r.error])).toEqual([["COMPLETED", null], ["COMPLETED", null]]);
    expect(results.map((r) => evaluation(r).outcome_reward)).toEqual([1, 0]);
    expect(results.map((r) => evaluation(r).collected_bytes)).toEqual(["fixed\n".length, "broken\n".length]);
    for (const r of results) {
      expect(evaluation(r)).toMatchObject({ strategy: "fresh_command", evaluator_node_id: "ev-a", evaluator_delivery_count: 1 });
      expect(r.node_id).toBe("gw-noeval");
      expect(r.timing.eval_wait_ms).toBeGreaterThan(0);
      expect(r.timing.eval_wait_ms).toBeLessThanOrEqual(r.timing.eval_ms);
    }
    const st = await until("ev-a's metrics", async () => {
      const s = await request<SystemStatus>(sys.client, SUBJECTS.api.status, {});
      const ev = s.evaluators.find((e) => e.node_id === "ev-a");
      return ev && ev.metrics.completed === 2 ? s : undefined;
    });
    expect(st.evaluators.find((e) => e.node_id === "ev-a")).toMatchObject({ kind: "evaluator", healthy: true, hosted_by: null, pool: "default", metrics: { inflight: 0, failed: 0 } });
    // Gateways and evaluators share polar_nodes but are listed apart.
    expect(st.nodes.map((n) => n.node_id)).toEqual(["gw-noeval"]);
    await procs.pop()!.stop();
  }, 150_000);

  it("a request whose evaluator is killed mid-evaluation is evaluated by another", async () => {
    // Runtimes of an evaluator carry its node id: on ev-doomed the evaluation hangs, elsewhere it is quick.
    const command = `if [ "$POLAR_GATEWAY_ID" = ev-doomed ]; then sleep 60; fi; grep -qx fixed "$POLAR_EVAL_INPUT"`;
    const doomed = await spawnEvaluator(sys.nats.url, "ev-doomed", ["-c", config]);
    procs.push(doomed);
    await request(sys.client, SUBJECTS.api.submit, task("killed", command));
    await until("ev-doomed to take the evaluation", async () => {
      const s = await request<SystemStatus>(sys.client, SUBJECTS.api.status, {});
      return s.evaluators.find((e) => e.node_id === "ev-doomed")?.metrics.inflight === 1 ? true : undefined;
    });
    doomed.child.kill("SIGKILL");
    expect(await doomed.exited).toBeNull();
    procs.push(await spawnEvaluator(sys.nats.url, "ev-b", ["-c", config]));
    const [r] = await finished(sys, "killed");
    expect(r.status).toBe("COMPLETED");
    expect(evaluation(r)).toMatchObject({ outcome_reward: 1, evaluator_node_id: "ev-b", evaluator_delivery_count: 2 });
    // Metrics travel with heartbeats: wait for the one after the evaluation.
    const ev = await until("ev-b's metrics", async () => {
      const e = (await request<SystemStatus>(sys.client, SUBJECTS.api.status, {})).evaluators.find((x) => x.node_id === "ev-b");
      return e && e.metrics.completed >= 1 ? e : undefined;
    });
    expect(ev.metrics).toMatchObject({ redelivered: 1, completed: 1 });
  }, 150_000);

  it("with no evaluator for its pool, the session budget bounds the wait", async () => {
    await sys.startGateway({ nodeId: "gw-lonely", pool: "lonely", evaluator: false });
    const t0 = Date.now();
    await request(sys.client, SUBJECTS.api.submit, task("unanswered", "true", { pool: "lonely", timeout_seconds: 8 }));
    const [r] = await finished(sys, "unanswered");
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect([r.status, r.error]).toEqual(["TIMEOUT", expect.stringMatching(/no evaluator answered within the session budget \(pool lonely/)]);
    expect(evaluation(r)).toMatchObject({ outcome_reward: 0, reward_discarded: true });
  });
});
