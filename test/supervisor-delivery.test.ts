/**
 * What a finished task hands out, over the real system (nats-server,
 * supervisor, a gateway with the local runtime, the sim):
 * - callbacks carry an `Idempotency-Key` (task id + delivery id) that a real
 *   HTTP receiver can drop repeats by: a retried POST has the same key,
 *   another task and another run of the same task id have other keys;
 * - a task shows `completed` only once every trace of it is on POLAR_TRACES;
 * - `metadata.eval_sampling_seed_base` no longer makes sessions ERROR: every
 *   session completes and carries `eval_sampling_seed = base + sample index`.
 */
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import type { TaskResult, TaskStatus } from "../src/protocol/schemas.ts";
import { STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import { jetstreamManager } from "@nats-io/jetstream";
import { listen, readBody } from "../src/util/http.ts";
import { waitFor, waitTaskDone } from "./helpers/gateway.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const CALL = `curl -sf -o /dev/null -H "authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json' -d '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}' "$OPENAI_BASE_URL/chat/completions"`;

function task(task_id: string, extra: Record<string, unknown> = {}) {
  return {
    task_id,
    instruction: "x",
    num_samples: 2,
    timeout_seconds: 60,
    runtime: { backend: "local", kwargs: { isolation: "none" } },
    agent: { harness: "shell", custom_shell: { command: CALL } },
    ...extra,
  };
}

interface Received {
  key: string | undefined;
  body: TaskResult;
  answered: number;
}

describe("task delivery", () => {
  let sys: TestSystem;
  let receiver: Server;
  let url: string;
  const received: Received[] = [];
  /** Status codes the receiver answers, in order (then 200). */
  const answers: number[] = [];

  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor({ callback: { backoffMs: 50 } });
    await sys.startGateway({ nodeId: "gw-delivery", limits: { maxRunWorkers: 2 } });
    receiver = createServer(async (req, res) => {
      const body = JSON.parse((await readBody(req, 1 << 26)).toString()) as TaskResult;
      const answered = answers.shift() ?? 200;
      received.push({ key: req.headers["idempotency-key"] as string | undefined, body, answered });
      res.statusCode = answered;
      res.end();
    });
    url = `http://127.0.0.1:${await listen(receiver, 0, "127.0.0.1")}/cb`;
  });
  afterAll(async () => {
    receiver?.close();
    await sys?.stop();
  });

  const callbacksOf = (taskId: string, n: number) =>
    waitFor(`${n} callback POST(s) of ${taskId}`, () => {
      const got = received.filter((r) => r.body.task_id === taskId);
      return got.length >= n && got;
    }, 60_000);

  it("callbacks carry an Idempotency-Key: the same on a repeat, different for another task or another run", async () => {
    answers.push(503); // the first POST fails: the supervisor sends it again
    await request(sys.client, SUBJECTS.api.submit, task("cb-a", { callback_url: url }));
    const a = await callbacksOf("cb-a", 2);
    expect(a.map((r) => r.answered)).toEqual([503, 200]);
    expect(a[0].key).toMatch(/^cb-a:.+/);
    expect(a[1].key).toBe(a[0].key);
    for (const r of a) expect(r.body.idempotency_key).toBe(r.key);
    expect(a[1].body.results.map((r) => r.status)).toEqual(["COMPLETED", "COMPLETED"]);

    await request(sys.client, SUBJECTS.api.submit, task("cb-b", { callback_url: url }));
    const [b] = await callbacksOf("cb-b", 1);
    expect(b.key).toMatch(/^cb-b:.+/);
    expect(b.key).not.toBe(a[0].key);

    // The same task id submitted again once finished is another delivery: another key.
    await request(sys.client, SUBJECTS.api.submit, task("cb-a", { callback_url: url }));
    const again = await callbacksOf("cb-a", 3);
    expect(again[2].key).toMatch(/^cb-a:.+/);
    expect(again[2].key).not.toBe(a[0].key);
    expect(again[2].body.results.map((r) => r.session_id)).not.toEqual(a[1].body.results.map((r) => r.session_id));
    // A receiver dropping repeats by key keeps exactly one copy of each delivery.
    const kept = new Map(received.filter((r) => r.answered === 200).map((r) => [r.key, r.body.task_id]));
    expect([...kept.values()].sort()).toEqual(["cb-a", "cb-a", "cb-b"]);
  }, 120_000);

  it("every trace is on POLAR_TRACES by the time a status poll first says completed", async () => {
    const jsm = await jetstreamManager(sys.client);
    const calls = `${CALL} && ${CALL} && ${CALL}`;
    await request(sys.client, SUBJECTS.api.submit, task("traces-first", { num_samples: 4, agent: { harness: "shell", custom_shell: { command: calls } } }));
    // Poll as fast as the API answers; at the first "completed", count the task's traces on the stream.
    let onStream = -1;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "traces-first", limit: 1 });
      if (st.status === "completed") {
        const info = await jsm.streams.info(STREAMS.traces, { subjects_filter: SUBJECTS.traceFilter("traces-first") });
        onStream = Object.values(info.state.subjects ?? {}).reduce((a, n) => a + n, 0);
        break;
      }
    }
    const st = await waitTaskDone(sys, "traces-first", 5_000);
    const expected = st.results.reduce((a, r) => a + r.trajectory.traces.length, 0);
    expect(st.results.map((r) => [r.status, r.error])).toEqual(st.results.map(() => ["COMPLETED", null]));
    expect(expected).toBe(12); // three calls per session, one trace each
    expect(onStream).toBe(expected);
  }, 90_000);

  it("metadata.eval_sampling_seed_base: every session completes with eval_sampling_seed = base + sample index", async () => {
    const base = 4242;
    await request(sys.client, SUBJECTS.api.submit, task("seeded", { num_samples: 3, metadata: { eval_sampling_seed_base: base, group_id: "g1" } }));
    const st: TaskStatus = await waitTaskDone(sys, "seeded", 60_000);
    expect(st.status).toBe("completed");
    expect(st.results).toHaveLength(3);
    const byIndex = new Map(st.sessions.map((s) => [s.session_id, s.sample_index]));
    expect([...byIndex.values()].sort()).toEqual([0, 1, 2]);
    for (const r of st.results) {
      expect(r.status, `${r.error}`).toBe("COMPLETED");
      const i = byIndex.get(r.session_id)!;
      // The session's metadata (as the reference's dispatch carries it), also kept with the captured session.
      expect(r.metadata).toMatchObject({ eval_sampling_seed: base + i, eval_sampling_seed_base: base, group_id: "g1" });
      expect(r.completion_session?.metadata).toMatchObject({ eval_sampling_seed: base + i, attempt: 1 });
      expect(r.trajectory.metadata.group_id).toBe("g1");
    }
  }, 90_000);
});
