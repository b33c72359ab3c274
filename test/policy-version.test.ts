/**
 * Policy versions: the engine's weight version read from each engine's answer
 * shape, version spans and the `max_policy_lag` rule (table tests), and end to
 * end over a real nats-server: a session whose first call went upstream
 * before a version bump publishes that trace masked as `stale_policy`.
 */
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyPolicyVersions } from "../src/actors/gateway/policy-versions.ts";
import { engineWeightVersion } from "../src/proxy/engine.ts";
import { request } from "../src/nats/messages.ts";
import { SessionResult, type CompletionRecord, type InferenceReply, type TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { startTestSystem, TEST_INFRA, type TestSystem } from "./helpers/system.ts";
import type { GatewayHandle } from "../src/actors/gateway/index.ts";

const CLIENT = join(fileURLToPath(new URL("..", import.meta.url)), "config/examples/chat-client.mjs");

describe("engine weight version", () => {
  it.each([
    [{ policy_version: "7", choices: [] }, "7"],
    [{ weight_version: 3, choices: [] }, "3"],
    [{ choices: [{ meta_info: { weight_version: "w12" } }] }, "w12"],
    [{ choices: [{ message: {} }] }, null],
  ])("%j -> %s", (raw, want) => {
    expect(engineWeightVersion(raw as Record<string, unknown>)).toBe(want);
  });
});

function rec(id: string, v: number | undefined, engine?: string): CompletionRecord {
  return { completion_id: id, request: {}, original_request: {}, response: {}, metadata: {}, policy_version: v, engine_weight_version: engine };
}

function result(records: CompletionRecord[], traces: Array<{ ids: string[]; mask: (0 | 1)[]; filter?: unknown }>): SessionResult {
  return SessionResult.parse({
    session_id: "s1",
    task_id: "t1",
    status: "COMPLETED",
    trajectory: {
      status: "COMPLETED",
      traces: traces.map((t) => ({
        prompt_ids: [1],
        response_ids: t.mask.map(() => 5),
        loss_mask: t.mask,
        response_logprobs: t.mask.map(() => -0.5),
        reward: 1,
        metadata: { completion_ids: t.ids, ...(t.filter ? { training_filter: t.filter } : {}) },
      })),
    },
    metadata: { user: "x" },
    completion_session: { session_id: "s1", completions: records },
  });
}

describe("applyPolicyVersions", () => {
  const records = [rec("a", 2, "2"), rec("b", 4, "4"), rec("c", 5, "5")];
  it.each([
    // [maxLag, current, expected stale flags per trace]
    [null, 9, [false, false]],
    [3, 5, [false, false]], // a: 5-2 = 3 <= 3
    [2, 5, [true, false]], // a: 3 > 2; trace 2 (c) lag 0
    [0, 5, [true, false]],
    [0, 6, [true, true]],
  ])("max_policy_lag %s at version %s", (maxLag, current, stale) => {
    const r = result(records, [{ ids: ["a", "b"], mask: [1, 1, 0, 1] }, { ids: ["c"], mask: [1, 1] }]);
    const out = applyPolicyVersions(r, current, maxLag);
    expect(out.stale).toBe(stale.filter(Boolean).length);
    const [t0, t1] = r.trajectory.traces;
    expect([t0.metadata.policy_version_min, t0.metadata.policy_version_max, t1.metadata.policy_version_min]).toEqual([2, 4, 5]);
    expect(t0.metadata.engine_weight_versions).toEqual(["2", "4"]);
    for (const [i, t] of r.trajectory.traces.entries()) {
      const f = t.metadata.training_filter as { reason: string; original_reward: number } | undefined;
      expect(f?.reason === "stale_policy").toBe(stale[i]);
      expect(t.loss_mask.includes(1)).toBe(!stale[i]);
      expect(t.response_ids).toHaveLength(i === 0 ? 4 : 2); // tokens kept
      expect(t.reward).toBe(1); // reward kept
    }
    expect([r.trajectory.metadata.policy_version_min, r.trajectory.metadata.policy_version_max]).toEqual([2, 5]);
    expect(r.metadata).toEqual({ user: "x", policy_version_current: current, ...(maxLag == null ? {} : { max_policy_lag: maxLag }), stale_traces: out.stale });
  });

  it("leaves an already masked trace's filter alone and ignores records without versions", () => {
    const masked = { masked: true, trainable: false, reason: "session_error" };
    const r = result([rec("a", 0), rec("b", undefined)], [{ ids: ["a"], mask: [0], filter: masked }, { ids: ["b"], mask: [1] }]);
    expect(applyPolicyVersions(r, 9, 0).stale).toBe(0);
    expect(r.trajectory.traces[0].metadata.training_filter).toEqual(masked);
    expect(r.trajectory.traces[1].metadata).not.toHaveProperty("policy_version_min");
    expect(r.trajectory.traces[1].loss_mask).toEqual([1]);
  });
});

describe("max_policy_lag end to end", () => {
  let sys: TestSystem;
  let gw: GatewayHandle;

  beforeAll(async () => {
    sys = await startTestSystem({ ttftMs: 300 });
    await sys.startSupervisor();
    gw = await sys.startGateway({ limits: { maxRunWorkers: 2 }, infra: { ...TEST_INFRA, dispatchAckWaitMs: 30_000 } });
  });

  afterAll(async () => {
    await sys?.stop();
  });

  async function until(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    while (!(await cond())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it("masks the trace whose completion went upstream before the version moved past the lag, and counts it", async () => {
    await request(sys.client, SUBJECTS.api.submit, {
      task_id: "lag-1",
      instruction: "Say hello twice.",
      num_samples: 2,
      timeout_seconds: 60,
      max_policy_lag: 0,
      runtime: { backend: "local" },
      agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(CLIENT)}`, env: { TURNS: "2" } } },
      builder: { strategy: "per_request" },
      evaluator: { strategy: "session_completed" },
    });
    await until("both first calls in flight", () => gw.gate.inflight === 2);
    await request<InferenceReply>(sys.client, SUBJECTS.api.inferencePause, {});
    await until("both second calls held", () => gw.gate.held === 2);
    await request<InferenceReply>(sys.client, SUBJECTS.api.inferenceResume, { policy_version: 1 });
    let st!: TaskStatus;
    await until("task done", async () => {
      st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "lag-1", with_results: true });
      return st.status === "completed";
    });
    expect(st.results).toHaveLength(2);
    for (const r of st.results) {
      expect(r.status).toBe("COMPLETED");
      expect(r.metadata).toMatchObject({ policy_version_current: 1, max_policy_lag: 0, stale_traces: 1 });
      const [first, second] = r.trajectory.traces;
      expect(first.metadata.training_filter).toMatchObject({ masked: true, trainable: false, reason: "stale_policy", original_reward: 1 });
      expect(first.loss_mask.every((m) => m === 0)).toBe(true);
      expect(first.response_ids.length).toBeGreaterThan(0);
      expect(first.reward).toBe(1);
      expect(second.metadata).not.toHaveProperty("training_filter");
      expect(second.loss_mask.every((m) => m === 1)).toBe(true);
      expect([first.metadata.policy_version_min, second.metadata.policy_version_min]).toEqual([0, 1]);
    }
    // The session summaries still count the sessions as usable (the second trace trains).
    expect(st.sessions.every((s) => s.usable)).toBe(true);
  });
});
