/**
 * Weight sync: the proxy's inference gate (unit), and pause/resume across a
 * supervisor and two gateways on a real nats-server with real harness
 * sessions (shell harness through the proxy, the sim upstream): in-flight
 * calls drain, new calls are held without an error and reach the upstream
 * only after resume, the policy version only grows, a gateway that joins
 * while paused starts paused, and the HTTP API answers the same.
 */
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InferenceGate } from "../src/proxy/gate.ts";
import { request } from "../src/nats/messages.ts";
import type { PolarError } from "../src/protocol/errors.ts";
import type { InferenceReply, SessionResult, TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { startTestSystem, TEST_INFRA, type TestSystem } from "./helpers/system.ts";
import type { GatewayHandle } from "../src/actors/gateway/index.ts";

const CLIENT = join(fileURLToPath(new URL("..", import.meta.url)), "config/examples/chat-client.mjs");

async function until(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("InferenceGate", () => {
  it("lets calls through while open and stamps the version", async () => {
    const gate = new InferenceGate({ policyVersion: 3 });
    const t = await gate.enter();
    expect([t.policyVersion, t.heldMs, gate.inflight]).toEqual([3, 0, 1]);
    t.leave();
    t.leave(); // idempotent
    expect(gate.inflight).toBe(0);
  });

  it("pause waits for the calls in flight, holds new ones, resume releases them under the new version", async () => {
    let now = 0;
    const gate = new InferenceGate({ now: () => now });
    const a = await gate.enter();
    const b = await gate.enter();
    const paused = gate.pause(10_000);
    const held = gate.enter();
    let heldDone = false;
    void held.then(() => (heldDone = true));
    a.leave();
    now = 40;
    b.leave();
    const r = await paused;
    expect(r).toEqual({ drained: 2, held: 1, inflight: 0, timedOut: false, ms: 40 });
    await new Promise((res) => setImmediate(res));
    expect(heldDone).toBe(false);
    now = 100;
    expect(gate.resume(1)).toEqual({ released: 1, policyVersion: 1, pausedMs: 100 });
    const t = await held;
    expect([t.policyVersion, t.heldMs]).toEqual([1, 100]);
    expect(gate.resume(0).policyVersion).toBe(1); // never lowered
  });

  it("a pause that times out reports what is still in flight; an aborted held call leaves the queue", async () => {
    const gate = new InferenceGate();
    const a = await gate.enter();
    const r = await gate.pause(30);
    expect(r).toMatchObject({ drained: 0, inflight: 1, timedOut: true });
    const ac = new AbortController();
    const held = gate.enter(ac.signal);
    expect(gate.held).toBe(1);
    ac.abort(new Error("client went away"));
    await expect(held).rejects.toThrow("client went away");
    expect(gate.held).toBe(0);
    a.leave();
    expect(gate.resume(0).released).toBe(0);
  });
});

describe("pause and resume across gateways", () => {
  let sys: TestSystem;
  let api: string;
  let gateways: GatewayHandle[];

  beforeAll(async () => {
    sys = await startTestSystem({ ttftMs: 400 });
    const sup = await sys.startSupervisor();
    api = sup.httpUrl!;
    // A long ack wait: a busy machine must not redeliver a session (a second attempt would add calls to count).
    const o = { limits: { maxRunWorkers: 4, maxInitWorkers: 4 }, infra: { ...TEST_INFRA, dispatchAckWaitMs: 30_000 } };
    gateways = [await sys.startGateway({ nodeId: "gw-a", ...o }), await sys.startGateway({ nodeId: "gw-b", ...o })];
  });

  afterAll(async () => {
    await sys?.stop();
  });

  const sum = (f: (g: GatewayHandle) => number) => gateways.reduce((a, g) => a + f(g), 0);
  const chatCalls = () => sys.upstream.exchanges.filter((e) => e.path.includes("/chat/completions")).length;

  it("drains in-flight calls, holds new ones without an error, releases them on resume under the new version", async () => {
    const task = {
      task_id: "pause-1",
      instruction: "Say hello twice.",
      num_samples: 4,
      timeout_seconds: 60,
      runtime: { backend: "local" },
      agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(CLIENT)}`, env: { TURNS: "2" } } },
      builder: { strategy: "per_request" },
      evaluator: { strategy: "session_completed" },
    };
    const calls0 = chatCalls();
    await request(sys.client, SUBJECTS.api.submit, task);
    await until("4 first calls in flight", () => sum((g) => g.gate.inflight) === 4);

    const pause = await request<InferenceReply>(sys.client, SUBJECTS.api.inferencePause, { timeout_seconds: 30 });
    expect(pause).toMatchObject({ paused: true, unchanged: false, policy_version: 0, drained: 4 });
    expect(pause.nodes.map((n) => n.node_id).sort()).toEqual(["gw-a", "gw-b"]);
    expect(pause.nodes.every((n) => n.ok && n.paused && n.inflight === 0 && !n.drain_timed_out)).toBe(true);
    expect(sum((g) => g.gate.inflight)).toBe(0);

    // Each session's second call waits at the gate; none reaches the engine.
    await until("4 second calls held", () => sum((g) => g.gate.held) === 4);
    expect(chatCalls() - calls0).toBe(4);

    const again = await request<InferenceReply>(sys.client, SUBJECTS.api.inferencePause, {});
    expect(again).toMatchObject({ paused: true, unchanged: true, held: 4, drained: 4 });

    const resume = await request<InferenceReply>(sys.client, SUBJECTS.api.inferenceResume, { policy_version: 1 });
    expect(resume).toMatchObject({ paused: false, policy_version: 1, unchanged: false, released: 4 });
    expect(resume.paused_ms).toBeGreaterThan(0);

    let st: TaskStatus | undefined;
    await until("task done", async () => {
      st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "pause-1", with_results: true });
      return st.status === "completed";
    }, 30_000);
    expect(st!.results.map((r: SessionResult) => r.status)).toEqual(["COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"]);
    expect(chatCalls() - calls0).toBe(8);
    for (const r of st!.results) {
      const recs = r.completion_session!.completions;
      expect(recs.map((c) => c.policy_version)).toEqual([0, 1]);
      expect(recs.map((c) => c.engine_weight_version)).toEqual(["0", "0"]);
      expect((recs[1].metadata.inference_timings as Record<string, number>).held_ms).toBeGreaterThan(0);
      expect(recs[0].metadata.inference_timings).not.toHaveProperty("held_ms");
      // The hold is part of the proxy's time before the call went upstream.
      const held = recs[1].metadata.inference_timings as Record<string, number>;
      expect(held.proxy_in_ms).toBeGreaterThanOrEqual(held.held_ms);
      expect(r.trajectory.traces.map((t) => [t.metadata.policy_version_min, t.metadata.policy_version_max])).toEqual([[0, 0], [1, 1]]);
      expect([r.trajectory.metadata.policy_version_min, r.trajectory.metadata.policy_version_max]).toEqual([0, 1]);
      expect(r.metadata).toMatchObject({ policy_version_current: 1, stale_traces: 0 });
      expect(r.trajectory.traces.every((t) => t.loss_mask.every((m) => m === 1))).toBe(true);
    }
  });

  it("refuses a lower version with a conflict; the same version is an idempotent answer", async () => {
    const err = (await request(sys.client, SUBJECTS.api.inferenceResume, { policy_version: 0 }).catch((e) => e)) as PolarError;
    expect(err.code).toBe("conflict");
    expect(err.details).toEqual({ policy_version: 0, current_version: 1 });
    const same = await request<InferenceReply>(sys.client, SUBJECTS.api.inferenceResume, { policy_version: 1 });
    // The idempotent answer repeats what the last resume released.
    expect(same).toMatchObject({ paused: false, policy_version: 1, unchanged: true, released: 4 });
    const bad = (await request(sys.client, SUBJECTS.api.inferenceResume, { policy_version: -2 }).catch((e) => e)) as PolarError;
    expect(bad.code).toBe("validation");
    expect(bad.message).toContain("policy_version");
  });

  it("a gateway that joins while paused starts paused and follows the resume", async () => {
    await request<InferenceReply>(sys.client, SUBJECTS.api.inferencePause, {});
    const late = await sys.startGateway({ nodeId: "gw-late" });
    expect(late.gate.paused).toBe(true);
    expect(late.gate.policyVersion).toBe(1);
    const r = await request<InferenceReply>(sys.client, SUBJECTS.api.inferenceResume, { policy_version: 2 });
    expect(r.nodes.map((n) => n.node_id).sort()).toEqual(["gw-a", "gw-b", "gw-late"]);
    expect(late.gate.paused).toBe(false);
    expect(late.gate.policyVersion).toBe(2);
  });

  it("serves the same over HTTP, with typed errors", async () => {
    const post = (path: string, body: unknown) =>
      fetch(`${api}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const p = await post("/rollout/inference/pause", { timeout_seconds: 5 });
    expect(p.status).toBe(200);
    expect(await p.json()).toMatchObject({ paused: true, policy_version: 2 });
    expect(await (await fetch(`${api}/rollout/inference`)).json()).toMatchObject({ paused: true, policy_version: 2 });
    const low = await post("/rollout/inference/resume", { policy_version: 1 });
    expect(low.status).toBe(409);
    expect(((await low.json()) as { error: { code: string } }).error.code).toBe("conflict");
    const bad = await post("/rollout/inference/resume", { version: 3 });
    expect(bad.status).toBe(400);
    const ok = await post("/rollout/inference/resume", { policy_version: 3 });
    expect(await ok.json()).toMatchObject({ paused: false, policy_version: 3, unchanged: false });
    expect(gateways.every((g) => !g.gate.paused && g.gate.policyVersion === 3)).toBe(true);
  });
});
