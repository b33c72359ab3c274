/**
 * Ids in subjects and KV keys: the encoding is injective and reversible, so
 * two distinct ids never share a key or a subject token (`a.b` and `a_2E_b`
 * once did: the second task replaced the first and their traces mixed).
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeliverPolicy } from "@nats-io/jetstream";
import { jetstream } from "@nats-io/jetstream";
import { request } from "../src/nats/messages.ts";
import { decode } from "../src/protocol/codec.ts";
import type { TaskStatus } from "../src/protocol/schemas.ts";
import { idFromToken, idToken, STREAMS, SUBJECTS, taskKey } from "../src/protocol/subjects.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const CLIENT = fileURLToPath(new URL("../config/examples/chat-client.mjs", import.meta.url));

describe("id encoding", () => {
  it("is injective and reversible", () => {
    const ids = ["a.b", "a_2E_b", "a_b", "a__b", "a_5F_b", "a._b", "a_.b", "x.y.z", "x_y_z", "A-1.2_3"];
    const tokens = ids.map((id) => idToken("task_id", id));
    expect(new Set(tokens).size).toBe(ids.length);
    for (const [i, t] of tokens.entries()) {
      expect(t).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(idFromToken("task_id", t)).toBe(ids[i]);
    }
    expect(idToken("task_id", "a.b")).toBe("a_2E_b");
    expect(idToken("task_id", "a_2E_b")).toBe("a_5F_2E_5F_b");
    expect(taskKey("a.b")).not.toBe(taskKey("a_2E_b"));
    expect(SUBJECTS.sessionCancel("s.1")).not.toBe(SUBJECTS.sessionCancel("s_2E_1"));
    for (const bad of ["a_2E", "a_41_b", "a.b", "a_2e_b", "_5F_x"]) expect(() => idFromToken("task_id", bad)).toThrow(TypeError);
  });
});

describe("ids that once collided", () => {
  let sys: TestSystem;

  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor();
    await sys.startGateway({ nodeId: "gw-ids", pool: "ids" });
  });
  afterAll(async () => {
    await sys?.stop();
  });

  const task = (task_id: string) => ({
    task_id,
    instruction: `Task ${task_id}`,
    num_samples: 2,
    pool: "ids",
    timeout_seconds: 60,
    runtime: { backend: "local" },
    agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(CLIENT)}`, env: { TURNS: "1" } } },
    evaluator: { strategy: "session_completed" },
  });

  async function waitDone(taskId: string): Promise<TaskStatus> {
    const deadline = Date.now() + 45_000;
    for (;;) {
      const st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: taskId });
      if (st.status === "completed") return st;
      if (Date.now() > deadline) throw new Error(`task ${taskId} not done: ${st.status}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async function traces(taskId: string, expected: number): Promise<Array<{ task_id: string; session_id: string }>> {
    const consumer = await jetstream(sys.client).consumers.get(STREAMS.traces, {
      filter_subjects: SUBJECTS.traceFilter(taskId),
      deliver_policy: DeliverPolicy.All,
    });
    const out: Array<{ task_id: string; session_id: string }> = [];
    for (;;) {
      const m = await consumer.next({ expires: 1000 });
      if (!m) break;
      out.push(decode(m.data) as { task_id: string; session_id: string });
    }
    expect(out.length).toBe(expected);
    return out;
  }

  it("submitting a_2E_b after a.b completed neither replaces it nor mixes traces", async () => {
    await request(sys.client, SUBJECTS.api.submit, task("a.b"));
    const first = await waitDone("a.b");
    const firstSessions = first.sessions.map((s) => s.session_id).sort();

    // Still running or completed, a_2E_b is its own task: the submit is accepted, not a replacement.
    const reply = await request<{ task_id: string; total_sessions: number }>(sys.client, SUBJECTS.api.submit, task("a_2E_b"));
    expect(reply).toMatchObject({ task_id: "a_2E_b", total_sessions: 2 });
    const second = await waitDone("a_2E_b");
    const secondSessions = second.sessions.map((s) => s.session_id).sort();
    expect(secondSessions.filter((s) => firstSessions.includes(s))).toEqual([]);

    const again = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "a.b" });
    expect(again.task_id).toBe("a.b");
    expect(again.sessions.map((s) => s.session_id).sort()).toEqual(firstSessions);

    const t1 = await traces("a.b", 2);
    expect(t1.every((t) => t.task_id === "a.b" && firstSessions.includes(t.session_id))).toBe(true);
    const t2 = await traces("a_2E_b", 2);
    expect(t2.every((t) => t.task_id === "a_2E_b" && secondSessions.includes(t.session_id))).toBe(true);
  });
});
