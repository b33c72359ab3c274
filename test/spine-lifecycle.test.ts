/**
 * Session lifecycle edges over the real system: cancellation, the agent
 * budget (partial, still-trainable trajectory), failing harness commands,
 * failing prepare steps, node registration.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import type { SystemStatus, TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const CLIENT = join(fileURLToPath(new URL("..", import.meta.url)), "config/examples/chat-client.mjs");

function task(task_id: string, command: string, extra: Record<string, unknown> = {}) {
  return {
    task_id,
    instruction: "hello",
    num_samples: 1,
    timeout_seconds: 30,
    runtime: { backend: "local" },
    agent: { harness: "shell", custom_shell: { command } },
    evaluator: { strategy: "session_completed" },
    ...extra,
  };
}

async function waitDone(sys: TestSystem, taskId: string): Promise<TaskStatus> {
  for (let i = 0; i < 300; i++) {
    const st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: taskId, with_results: true });
    if (["completed", "failed", "cancelled"].includes(st.status)) return st;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`task ${taskId} did not finish`);
}

describe("session lifecycle", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor();
    await sys.startGateway({ nodeId: "gw-life" });
  });
  afterAll(async () => {
    await sys?.stop();
  });

  it("registers the gateway with stage metrics and answers status over NATS and HTTP", async () => {
    const s = await request<SystemStatus>(sys.client, SUBJECTS.api.status, {});
    const node = s.nodes.find((n) => n.node_id === "gw-life")!;
    expect(node.healthy).toBe(true);
    expect(node.max_run_workers).toBe(2);
    expect(node.metrics).toMatchObject({ run_inflight: 0, ready_depth: 0 });
  });

  it("cancels a running task: the session ends ERROR 'session cancelled' within 3 s", async () => {
    await request(sys.client, SUBJECTS.api.submit, task("cancel-me", "echo started; sleep 30; echo never"));
    let live = "";
    for (let i = 0; i < 200 && live !== "RUNNING"; i++) {
      // the task status shows each running session's live stage before its result lands
      live = (await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "cancel-me", with_results: true })).sessions[0].status;
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(live).toBe("RUNNING");
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    const c = await request<TaskStatus>(sys.client, SUBJECTS.api.cancel, { task_id: "cancel-me" });
    expect(c.status).toBe("cancelling");
    const st = await waitDone(sys, "cancel-me");
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(st.status).toBe("cancelled");
    expect(st.results[0].status).toBe("ERROR");
    expect(st.results[0].error).toBe("session cancelled");
    expect(st.results[0].trajectory.traces.every((t) => t.loss_mask.every((m) => m === 0))).toBe(true);
    // a late resubmit of a cancelled task id is refused
    const again = (await request(sys.client, SUBJECTS.api.submit, task("cancel-me", "true")).catch((e) => e)) as { code: string };
    expect(again.code).toBe("conflict");
  });

  it("keeps a partial, trainable trajectory when the agent budget runs out", async () => {
    const cmd = `TURNS=2 node ${JSON.stringify(CLIENT)} && sleep 30`;
    await request(sys.client, SUBJECTS.api.submit, task("agent-timeout", cmd, { metadata: { agent_timeout: 2.5 } }));
    const st = await waitDone(sys, "agent-timeout");
    const r = st.results[0];
    expect(r.status).toBe("TIMEOUT");
    expect(r.agent_result).toMatchObject({ status: "timeout", return_code: -1 });
    expect(r.agent_result?.metadata.timeout_source).toBe("agent");
    expect(r.trajectory.traces).toHaveLength(2); // both captured calls survive
    for (const t of r.trajectory.traces) {
      expect(t.reward).toBe(0);
      expect(t.loss_mask.every((m) => m === 1)).toBe(true); // trainable agent timeout keeps its mask
      expect(t.metadata.training_filter).toMatchObject({ masked: false, trainable: true, reason: "agent_timeout" });
    }
  });

  it("records a failing harness command as ERROR with its exit code and output", async () => {
    await request(sys.client, SUBJECTS.api.submit, task("fails", "echo to-stdout; echo to-stderr >&2; exit 7"));
    const r = (await waitDone(sys, "fails")).results[0];
    expect(r.status).toBe("ERROR");
    expect(r.error).toBe("step 0 exited with code 7");
    expect(r.agent_result?.return_code).toBe(7);
    expect(r.agent_result?.metadata.stdout_tail).toBe("to-stdout\n");
    expect(r.agent_result?.metadata.stderr_tail).toBe("to-stderr\n");
  });

  it("scores sessions with the command evaluator run in the agent's runtime", async () => {
    const check = (reward_from?: string) => ({ strategy: "command", config: { command: "grep -q heads coin.txt && echo 1 || echo 0.25", ...(reward_from ? { reward_from } : {}) } });
    await request(sys.client, SUBJECTS.api.submit, task("coin-heads", `TURNS=1 node ${JSON.stringify(CLIENT)} && echo heads > coin.txt`, { evaluator: check() }));
    await request(sys.client, SUBJECTS.api.submit, task("coin-tails", `TURNS=1 node ${JSON.stringify(CLIENT)} && echo tails > coin.txt`, { evaluator: check("stdout") }));
    const heads = (await waitDone(sys, "coin-heads")).results[0];
    const tails = (await waitDone(sys, "coin-tails")).results[0];
    expect(heads.trajectory.metadata.evaluation).toMatchObject({ strategy: "command", outcome_reward: 1, exit_code: 0 });
    expect(tails.trajectory.metadata.evaluation).toMatchObject({ strategy: "command", outcome_reward: 0.25, stdout_tail: "0.25\n" });
    expect(heads.trajectory.traces.map((t) => t.reward)).toEqual([1]);
    expect(tails.trajectory.traces.map((t) => t.reward)).toEqual([0.25]);
    const bad = (await request(sys.client, SUBJECTS.api.submit, task("coin-bad", "true", { evaluator: { strategy: "command", config: { cmd: "x" } } })).catch((e) => e)) as { code: string; message: string };
    expect(bad.code).toBe("validation");
    expect(bad.message).toMatch(/evaluator\.config/);
  });

  it("stops early once enough sessions are usable: stragglers are cancelled with zeroed masks", async () => {
    // Its own gateway with a RUN worker per sample: with fewer, the two sleepers could take
    // every worker first and nothing would finish before they did.
    await sys.startGateway({ nodeId: "gw-wide", pool: "wide", limits: { maxInitWorkers: 4, maxRunWorkers: 4 } });
    const cmd = `TURNS=1 node ${JSON.stringify(CLIENT)} && { [ "$POLAR_SAMPLE_INDEX" -lt 2 ] || sleep 30; }`;
    const t0 = Date.now();
    await request(sys.client, SUBJECTS.api.submit, task("early", cmd, { num_samples: 4, early_stop_min_usable_sessions: 2, pool: "wide" }));
    const st = await waitDone(sys, "early");
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(st.status).toBe("completed");
    const byIndex = [...st.sessions].sort((a, b) => a.sample_index - b.sample_index);
    expect(byIndex.map((s) => s.status)).toEqual(["COMPLETED", "COMPLETED", "ERROR", "ERROR"]);
    expect(byIndex.map((s) => s.usable)).toEqual([true, true, false, false]);
    for (const s of byIndex.slice(2)) expect(s.error).toMatch(/^early stop/);
    const cancelled = st.results.filter((x) => x.status === "ERROR");
    expect(cancelled).toHaveLength(2);
    for (const r of cancelled) {
      expect(r.trajectory.traces.every((t) => t.reward === 0 && t.loss_mask.every((m) => m === 0))).toBe(true);
    }
  });

  it("records a failing prepare step as ERROR without running the agent", async () => {
    const t = task("bad-prepare", "touch ran", {
      runtime: { backend: "local", prepare: [{ type: "exec", command: "exit 3", max_attempts: 2 }] },
    });
    await request(sys.client, SUBJECTS.api.submit, t);
    const r = (await waitDone(sys, "bad-prepare")).results[0];
    expect(r.status).toBe("ERROR");
    expect(r.error).toMatch(/^runtime initialization failed: .*exit/);
    expect(r.agent_result ?? null).toBeNull();
    expect(r.timing.run_ms).toBe(0);
  });
});
