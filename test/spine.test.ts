/**
 * The spine end to end over a real nats-server: tasks over NATS and HTTP,
 * traces equal to what the inference server returned, durability of the
 * supervisor, gateways joining and dying, validation at the edges.
 */
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import { decode } from "../src/protocol/codec.ts";
import type { PolarError } from "../src/protocol/errors.ts";
import type { SessionResult, TaskResult, TaskStatus, Trace } from "../src/protocol/schemas.ts";
import { STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import { listen, readBody } from "../src/util/http.ts";
import { verifyTrajectory } from "../src/builders/verify.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLIENT = join(ROOT, "config/examples/chat-client.mjs");

function shellTask(task_id: string, num_samples: number, env: Record<string, string> = {}, extra: Record<string, unknown> = {}) {
  return {
    task_id,
    instruction: `Task ${task_id}: say hello.`,
    num_samples,
    timeout_seconds: 60,
    runtime: { backend: "local" },
    agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(CLIENT)}`, env: { TURNS: "2", ...env } } },
    builder: { strategy: "per_request" },
    evaluator: { strategy: "session_completed" },
    ...extra,
  };
}

async function waitDone(sys: TestSystem, taskId: string, timeoutMs = 45_000): Promise<TaskStatus> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: taskId, with_results: true }, { timeoutMs: 5000 }).catch(() => undefined);
    if (st && ["completed", "failed", "cancelled"].includes(st.status)) return st;
    if (Date.now() > deadline) throw new Error(`task ${taskId} not done: ${JSON.stringify(st?.sessions.map((s) => s.status))}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Every trace's prompt ids, sampled ids and logprobs must be exactly those of one
 * upstream answer, each answer matched at most once.
 */
function expectTracesFromUpstream(sys: TestSystem, results: SessionResult[]) {
  const unmatched = new Map<string, Record<string, any>[]>();
  for (const ex of sys.upstream.exchanges) {
    const key = JSON.stringify([ex.response.prompt_token_ids, (ex.response.choices as any[])?.[0]?.token_ids]);
    unmatched.set(key, [...(unmatched.get(key) ?? []), ex.response]);
  }
  let n = 0;
  for (const r of results) {
    for (const t of r.trajectory.traces) {
      const candidates = unmatched.get(JSON.stringify([t.prompt_ids, t.response_ids]));
      expect(candidates?.length, "trace ids match an upstream answer").toBeGreaterThan(0);
      const choice = candidates!.shift()!.choices[0];
      expect(t.prompt_ids.length).toBeGreaterThan(10);
      expect(t.response_logprobs).toEqual(choice.logprobs.content.map((c: { logprob: number }) => c.logprob));
      expect(t.loss_mask).toEqual(t.response_ids.map(() => 1));
      expect(t.response_ids.at(-1)).toBe(151645);
      n++;
    }
  }
  return n;
}

describe("spine: supervisor and gateway on NATS JetStream", () => {
  let sys: TestSystem;
  let api: string;

  beforeAll(async () => {
    sys = await startTestSystem();
    const sup = await sys.startSupervisor();
    api = sup.httpUrl!;
    await sys.startGateway({ nodeId: "gw-main" });
  });
  afterAll(async () => {
    await sys?.stop();
  });

  it("runs a 4-sample task submitted over NATS; traces equal the upstream's tokens and stream on POLAR_TRACES", async () => {
    const received: Trace[] = [];
    const sub = sys.client.subscribe(SUBJECTS.traceFilter("nats-4"), {
      callback: (_e, m) => void received.push((decode(m.data) as { trace: Trace }).trace),
    });
    const reply = await request<{ total_sessions: number }>(sys.client, SUBJECTS.api.submit, shellTask("nats-4", 4));
    expect(reply.total_sessions).toBe(4);
    const st = await waitDone(sys, "nats-4");
    expect(st.status).toBe("completed");
    expect(st.sessions.map((s) => s.status)).toEqual(["COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"]);
    expect(st.results).toHaveLength(4);
    for (const r of st.results) {
      expect(r.trajectory.traces).toHaveLength(2); // two model calls per session
      expect(r.trajectory.traces.every((t) => t.reward === 1)).toBe(true);
      expect(r.completion_session?.completions).toHaveLength(2);
      expect(r.timing.run_ms).toBeGreaterThan(0);
      expect(r.agent_result?.status).toBe("completed");
    }
    expect(expectTracesFromUpstream(sys, st.results)).toBe(8);
    // the samples of a group are told apart upstream (the proxy sends the session id), so they differ
    expect(new Set(st.results.map((r) => JSON.stringify(r.trajectory.traces[0].response_ids))).size).toBeGreaterThan(1);
    await new Promise((r) => setTimeout(r, 300));
    await sub.drain();
    expect(received).toHaveLength(8);
    const stream = await sys.client.request(`$JS.API.STREAM.INFO.${STREAMS.traces}`);
    expect(JSON.parse(new TextDecoder().decode(stream.data)).state.messages).toBeGreaterThanOrEqual(8);
  });

  it("streams lifecycle events over HTTP as server-sent events", async () => {
    const ac = new AbortController();
    const res = await fetch(`${api}/events`, { signal: ac.signal });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const reader = res.body!.getReader();
    let text = "";
    await request(sys.client, SUBJECTS.api.submit, shellTask("sse-1", 1));
    while (!text.includes("event: task.done")) text += new TextDecoder().decode((await reader.read()).value);
    ac.abort();
    expect(text).toMatch(/event: task\.created\ndata: \{"task_id":"sse-1","total_sessions":1\}/);
    for (const s of ["INITIALIZING", "READY", "RUNNING", "POST_RUN", "COMPLETED"]) expect(text).toContain(`"status":"${s}"`);
  });

  it("runs a task submitted over HTTP and POSTs the TaskResult to its callback", async () => {
    const callbacks: TaskResult[] = [];
    const cbServer = createServer(async (req, res) => {
      callbacks.push(JSON.parse((await readBody(req, 1 << 26)).toString()));
      res.end("ok");
    });
    const port = await listen(cbServer, 0, "127.0.0.1");
    try {
      const res = await fetch(`${api}/rollout/task/submit`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(shellTask("http-2", 2, {}, { callback_url: `http://127.0.0.1:${port}/cb` })),
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ task_id: "http-2", status: "running" });
      const st = await waitDone(sys, "http-2");
      expect(st.status).toBe("completed");
      const got = (await (await fetch(`${api}/rollout/task/http-2`)).json()) as TaskStatus;
      expect(got.completed_sessions).toBe(2);
      for (let i = 0; i < 50 && !callbacks.length; i++) await new Promise((r) => setTimeout(r, 100));
      expect(callbacks).toHaveLength(1);
      expect(callbacks[0].task_id).toBe("http-2");
      expect(callbacks[0].results.map((r) => r.status)).toEqual(["COMPLETED", "COMPLETED"]);
      expect(expectTracesFromUpstream(sys, callbacks[0].results)).toBe(4);
    } finally {
      cbServer.close();
    }
  });

  it("builds prefix_merging trajectories that the verifier proves against the raw captured session", async () => {
    // A chat with new user turns: Qwen3's template re-renders earlier answers (the thinking
    // scaffold goes, "\n" merges with the content's leading newlines), so later prompts do not
    // extend earlier ones token for token. The builder must then start new chains, say why,
    // and still make every sampled token trainable exactly once.
    const t = shellTask("merged-2", 2, { TURNS: "3" }, { builder: { strategy: "prefix_merging", config: {} } });
    await request(sys.client, SUBJECTS.api.submit, t);
    const st = await waitDone(sys, "merged-2");
    expect(st.status).toBe("completed");
    for (const r of st.results) {
      const session = r.completion_session!;
      expect(session.completions).toHaveLength(3);
      const sampled = session.completions.flatMap((c) => (c.response.choices as { token_ids: number[] }[])[0].token_ids);
      const trainable = r.trajectory.traces.flatMap((t) => t.response_ids.filter((_, i) => t.loss_mask[i] === 1));
      expect(trainable).toEqual(sampled);
      const stats = r.trajectory.metadata.reconstruction_stats as { chain_starts: { reason: string }[]; completions_merged: number };
      expect(stats.chain_starts.map((c) => c.reason)).toEqual(
        r.trajectory.traces.map((_, i) => (i === 0 ? "first" : "diverged_from_tip")),
      );
      expect(stats.completions_merged).toBe(3);
      expect(verifyTrajectory(r.trajectory, session)).toMatchObject({ ok: true, errors: [] });
    }
  });

  it("rejects malformed tasks over HTTP and NATS naming every bad field, and queues nothing", async () => {
    const before = await streamMessages(sys, STREAMS.sessions);
    const bad = { task_id: "bad task!", num_samples: 0, timeout_seconds: "soon", agent: { harness: "shell" } };
    const res = await fetch(`${api}/rollout/task/submit`, { method: "POST", body: JSON.stringify(bad) });
    expect(res.status).toBe(400);
    const body = (await res.json()) as any;
    expect(body.error.code).toBe("validation");
    const paths = body.error.details.issues.map((i: { path: string }) => i.path);
    expect(paths).toEqual(expect.arrayContaining(["task_id", "instruction", "num_samples", "timeout_seconds", "agent.custom_shell"]));

    const err = (await request(sys.client, SUBJECTS.api.submit, bad).catch((e) => e)) as PolarError;
    expect(err.code).toBe("validation");
    expect((err.details as { issues: { path: string }[] }).issues.map((i) => i.path)).toEqual(expect.arrayContaining(paths));

    const json = await request(sys.client, SUBJECTS.api.submit, { ...shellTask("x", 1), builder: { strategy: "nope" } }, { json: true }).catch((e) => e);
    expect((json as PolarError).code).toBe("validation");
    expect((json as PolarError).message).toMatch(/builder\.strategy.*per_request/);

    const notJson = await fetch(`${api}/rollout/task/submit`, { method: "POST", body: "{nope" });
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as any).error.code).toBe("validation");
    expect((await fetch(`${api}/rollout/task/never-submitted`)).status).toBe(404);
    expect(await streamMessages(sys, STREAMS.sessions)).toBe(before);
  });

  it("answers a model call with an unknown credential with 401 in OpenAI format", async () => {
    const nodes = await request<{ nodes: { gateway_url: string }[] }>(sys.client, SUBJECTS.api.status, {});
    const proxy = nodes.nodes[0].gateway_url;
    const res = await fetch(`${proxy}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer sk-polar-unknown", "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(401);
    const body = (await res.json()) as any;
    expect(body.error.type).toBe("authentication_error");
    expect(typeof body.error.message).toBe("string");
  });

  it("keeps a task's state and results across a supervisor restart mid-task", async () => {
    await request(sys.client, SUBJECTS.api.submit, shellTask("restart-3", 3, { DELAY_MS: "600" }));
    await sys.stopSupervisors(); // while the sessions run
    const noAnswer = await request(sys.client, SUBJECTS.api.get, { task_id: "restart-3", with_results: true }, { timeoutMs: 500 }).catch((e) => e);
    expect((noAnswer as PolarError).code).toMatch(/unavailable|timeout/);
    await new Promise((r) => setTimeout(r, 1500)); // results pile up on POLAR_RESULTS meanwhile
    const sup = await sys.startSupervisor();
    api = sup.httpUrl!;
    const st = await waitDone(sys, "restart-3");
    expect(st.status).toBe("completed");
    expect(st.results).toHaveLength(3);
    expect(st.sessions.map((s) => [s.status, s.error])).toEqual(st.sessions.map(() => ["COMPLETED", null]));
    expect(expectTracesFromUpstream(sys, st.results)).toBe(6);
  });

  it("spreads queued sessions over a second gateway that joins", async () => {
    await sys.startGateway({ nodeId: "gw-b", limits: { maxInitWorkers: 1, maxRunWorkers: 1, readyCapacity: 1 } });
    await request(sys.client, SUBJECTS.api.submit, shellTask("two-gw", 8, { DELAY_MS: "300" }));
    const st = await waitDone(sys, "two-gw");
    expect(st.status).toBe("completed");
    const nodes = new Set(st.results.map((r) => r.node_id));
    expect(nodes).toEqual(new Set(["gw-main", "gw-b"]));
  });

  it("redelivers a session whose gateway process is killed while RUNNING; it completes as attempt 2", async () => {
    await sys.stopGateways();
    const dir = await mkdtemp(join(tmpdir(), "polar-gw-"));
    const cfg = join(dir, "gw.json");
    await writeFile(cfg, JSON.stringify({ infra: { dispatch_ack_wait_ms: 2500, max_deliver: 5, node_ttl_ms: 10000 } }));
    const child = spawn(
      process.execPath,
      [join(ROOT, "bin/polar.js"), "gateway", "--nats", sys.nats.url, "--upstream", sys.upstream.url, "--node-id", "gw-doomed", "-c", cfg],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, POLAR_LOG_LEVEL: "warn" } },
    );
    const running = new Promise<string>((resolve) => {
      const sub = sys.client.subscribe(SUBJECTS.event("session.state_changed"), {
        callback: (_e, m) => {
          const ev = decode(m.data) as { status: string; session_id: string };
          if (ev.status === "RUNNING") {
            sub.unsubscribe();
            resolve(ev.session_id);
          }
        },
      });
    });
    await request(sys.client, SUBJECTS.api.submit, shellTask("killed-gw", 1, { DELAY_MS: "1500" }));
    const sid = await running;
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    await sys.startGateway({ nodeId: "gw-rescue" });
    const st = await waitDone(sys, "killed-gw");
    expect(st.status).toBe("completed");
    const r = st.results[0];
    expect(r.session_id).toBe(sid);
    expect(r.status).toBe("COMPLETED");
    expect(r.attempt).toBe(2);
    expect(r.node_id).toBe("gw-rescue");
    expect(r.trajectory.traces).toHaveLength(2);
    expect(r.completion_session?.completions.every((c) => c.attempt === 2)).toBe(true);
  });
});

async function streamMessages(sys: TestSystem, stream: string): Promise<number> {
  const m = await sys.client.request(`$JS.API.STREAM.INFO.${stream}`);
  return JSON.parse(new TextDecoder().decode(m.data)).state.messages;
}
