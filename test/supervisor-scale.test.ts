/**
 * Tasks of any size on a nats-server with the default 1 MiB payload limit: a
 * task is a small header plus one entry per session, so 10,000 sessions are
 * accepted, a status poll reads counters and one page, long error strings
 * cannot push a record past the limit, a result that can never be recorded
 * ends as a visible ERROR instead of retrying forever, and one unreadable
 * record stops neither the sweep nor the listings.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishDurable, request } from "../src/nats/messages.ts";
import type { PolarError } from "../src/protocol/errors.ts";
import { openInfra, type Infra } from "../src/nats/infra.ts";
import { encode } from "../src/protocol/codec.ts";
import { emptyTiming, type SessionLease, type SessionResult, type SystemStatus, type TaskStatus } from "../src/protocol/schemas.ts";
import { leaseKey, SUBJECTS, TASK_KEYS } from "../src/protocol/subjects.ts";
import { sha256Hex } from "../src/security/result-auth.ts";
import type { SupervisorHandle } from "../src/actors/supervisor/index.ts";
import { startTestSystem, TEST_INFRA, type TestSystem } from "./helpers/system.ts";

const MIB = 1024 * 1024;
const CLIENT = fileURLToPath(new URL("../config/examples/chat-client.mjs", import.meta.url));

function task(task_id: string, pool: string, num_samples: number, extra: Record<string, unknown> = {}) {
  return {
    task_id,
    instruction: `Task ${task_id}`,
    num_samples,
    pool,
    timeout_seconds: 60,
    runtime: { backend: "local" },
    agent: { harness: "shell", custom_shell: { command: "true" } },
    evaluator: { strategy: "session_completed" },
    ...extra,
  };
}

async function until<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 40_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("supervisor: tasks of any size", () => {
  let sys: TestSystem;
  let sup: SupervisorHandle;
  let infra: Infra;

  const get = (q: Record<string, unknown>) => request<TaskStatus>(sys.client, SUBJECTS.api.get, q, { timeoutMs: 20_000 });
  const final = (taskId: string) =>
    until(`task ${taskId}`, async () => {
      const st = await get({ task_id: taskId, limit: 1 });
      return ["completed", "cancelled"].includes(st.status) ? st : undefined;
    });
  /** Publishes a result as a gateway would: it holds the session's lease and carries its token. */
  const report = async (r: Partial<SessionResult> & { session_id: string; task_id: string }, msgId: string) => {
    const token = `token-${r.session_id}`;
    const now = new Date().toISOString();
    const deadline = new Date(Date.now() + 3600_000).toISOString();
    const lease: SessionLease = { session_id: r.session_id, task_id: r.task_id, attempt: 1, node_id: "gw-report", init_at: now, deadline_at: deadline, token_sha256: sha256Hex(token), updated_at: now };
    await infra.leases.put(leaseKey(r.session_id), encode(lease));
    const result = { trajectory: { status: r.status ?? "ERROR", traces: [] }, timing: emptyTiming(), attempt: 1, node_id: "gw-report", lease_token: token, ...r };
    await publishDurable(infra, SUBJECTS.result(r.task_id), result, msgId);
  };

  beforeAll(async () => {
    sys = await startTestSystem({}, { maxPayload: MIB });
    sup = await sys.startSupervisor({ results: { maxDeliver: 3, retryBaseMs: 50 }, resultGraceMs: 500 });
    infra = await openInfra(sys.client, TEST_INFRA);
  });
  afterAll(async () => {
    await sys?.stop();
  });

  it("accepts 10,000 sessions in one task; no stored value grows with num_samples; a status poll reads one page", async () => {
    const reply = await request<{ total_sessions: number }>(sys.client, SUBJECTS.api.submit, task("ten-k", "nobody-10k", 10_000), { timeoutMs: 120_000 });
    expect(reply.total_sessions).toBe(10_000);

    const header = await infra.tasks.get(TASK_KEYS.header("ten-k"));
    expect(header!.value.length).toBeLessThan(4096);
    const poll = await get({ task_id: "ten-k", limit: 1 });
    expect(poll).toMatchObject({ status: "running", total_sessions: 10_000, completed_sessions: 0, results: [] });
    expect(poll.sessions).toHaveLength(1);
    const tail = await get({ task_id: "ten-k", offset: 9990, limit: 20 });
    expect(tail.sessions.map((s) => s.sample_index)).toEqual(Array.from({ length: 10 }, (_, i) => 9990 + i));
    const run = /^ses-([0-9a-f]+)-9999$/.exec(tail.sessions.at(-1)!.session_id)![1];
    const entry = await infra.tasks.get(TASK_KEYS.session("ten-k", run, 9999));
    expect(entry!.value.length).toBeLessThan(512);

    // The pool has no gateway: status says so.
    const status = await request<SystemStatus>(sys.client, SUBJECTS.api.status, {});
    expect(status.unserved_pools).toContainEqual({ pool: "nobody-10k", pending_sessions: 10_000 });
    expect(status.running_tasks).toBeGreaterThanOrEqual(1);

    const over = await request(sys.client, SUBJECTS.api.submit, task("ten-k-1", "nobody-10k", 10_001)).then(() => undefined, (e: PolarError) => e);
    expect(over).toMatchObject({ code: "validation" });
    expect(over!.message).toMatch(/num_samples.*10000/);
  });

  it("refuses at submit a record too large to store, with its reason, and stores nothing", async () => {
    // Within the instruction limit in characters, but 4-byte characters make the record exceed 1 MiB.
    const err = await request(sys.client, SUBJECTS.api.submit, task("too-big", "nobody", 1, { instruction: "😀".repeat(262_000) }), { json: true }).then(() => undefined, (e: PolarError) => e);
    expect(err).toMatchObject({ code: "payload_too_large" });
    expect(err!.message).toMatch(/record is \d+ bytes, more than the store's limit/);
    const missing = await get({ task_id: "too-big" }).catch((e) => e);
    expect(missing).toMatchObject({ code: "not_found" });
  });

  it("records 20 results with long error strings (once more than 1 MiB in one record)", async () => {
    await request(sys.client, SUBJECTS.api.submit, task("long-errors", "nobody-long", 20));
    const { sessions } = await get({ task_id: "long-errors" });
    for (const s of sessions) {
      const error = `${s.session_id} failed: ${"x".repeat(60_000)}`;
      await report({ session_id: s.session_id, task_id: "long-errors", status: "ERROR", error }, `${s.session_id}:1`);
    }
    const st = await final("long-errors");
    expect(st).toMatchObject({ status: "completed", completed_sessions: 20, status_counts: { ERROR: 20 } });
    const page = await get({ task_id: "long-errors", with_results: true, offset: 5, limit: 3 });
    expect(page.results.map((r) => r.session_id)).toEqual(sessions.slice(5, 8).map((s) => s.session_id));
    expect(page.results[0].error).toHaveLength(sessions[5].session_id.length + 9 + 60_000);
  });

  it("ends a result that can never be recorded as a visible ERROR after its last delivery", async () => {
    await request(sys.client, SUBJECTS.api.submit, task("unrecordable", "nobody-unrec", 2));
    const { sessions } = await get({ task_id: "unrecordable" });
    const run = /^ses-([0-9a-f]+)-/.exec(sessions[1].session_id)![1];
    await infra.tasks.put(TASK_KEYS.session("unrecordable", run, 1), new TextEncoder().encode("not msgpack {"));
    for (const s of sessions) await report({ session_id: s.session_id, task_id: "unrecordable", status: "COMPLETED" }, `${s.session_id}:1`);
    const st = await final("unrecordable");
    const full = await get({ task_id: "unrecordable" });
    expect(st.status).toBe("completed");
    expect(full.sessions[0].status).toBe("COMPLETED");
    expect(full.sessions[1]).toMatchObject({ status: "ERROR", attempt: 1 });
    expect(full.sessions[1].error).toMatch(/could not be recorded after 3 deliveries/);
    expect(sup.stats.unprocessable_results).toBe(1);
  });

  it("one unreadable task record stops neither the sweep nor the listings", async () => {
    await request(sys.client, SUBJECTS.api.submit, task("aaa-broken", "nobody-broken", 1));
    await infra.tasks.put(TASK_KEYS.header("aaa-broken"), new TextEncoder().encode("garbage"));
    await request(sys.client, SUBJECTS.api.submit, task("zzz-queued", "nobody-queued", 3, { queue_timeout_seconds: 1 }));
    const st = await final("zzz-queued");
    expect(st).toMatchObject({ status: "completed", status_counts: { TIMEOUT: 3 } });
    const full = await get({ task_id: "zzz-queued" });
    for (const s of full.sessions) expect(s.error).toMatch(/no gateway started the session within queue_timeout_seconds \(1 s\)/);
    const status = await request<SystemStatus>(sys.client, SUBJECTS.api.status, {});
    expect(status.nodes).toEqual([]);
    expect(sup.stats.sweep_errors).toBeGreaterThan(0);
    const broken = await get({ task_id: "aaa-broken" }).catch((e) => e);
    expect(broken).toMatchObject({ code: "internal" });
    expect(broken.message).toMatch(/unreadable/);
  });
});

describe("supervisor: a smaller run that completes", () => {
  let sys: TestSystem;

  beforeAll(async () => {
    sys = await startTestSystem({}, { maxPayload: MIB });
    await sys.startSupervisor();
    await sys.startGateway({ nodeId: "gw-scale", pool: "scale", limits: { maxInitWorkers: 8, maxRunWorkers: 8, maxPostrunWorkers: 8 } });
  });
  afterAll(async () => {
    await sys?.stop();
  });

  it("runs 24 cheap sessions to completion; results come only on request, one page at a time", async () => {
    // One short model call each (a session without any is an ERROR by design).
    const agent = { harness: "shell", custom_shell: { command: `node ${JSON.stringify(CLIENT)}`, env: { TURNS: "1" } } };
    await request(sys.client, SUBJECTS.api.submit, task("cheap-24", "scale", 24, { agent }));
    const st = await until("cheap-24", async () => {
      const s = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "cheap-24", limit: 1 });
      return s.status === "completed" ? s : undefined;
    }, 140_000);
    const all = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "cheap-24" });
    expect(st).toMatchObject({ completed_sessions: 24, total_sessions: 24, results: [] });
    const byStatus: Record<string, number> = {};
    for (const s of all.sessions) byStatus[s.status] = (byStatus[s.status] ?? 0) + 1;
    expect(st.status_counts).toEqual(byStatus);
    expect(byStatus.COMPLETED).toBeGreaterThan(0);
    expect(all.sessions).toHaveLength(24);
    expect(all.results).toEqual([]);
    const page = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "cheap-24", with_results: true, offset: 10, limit: 10 });
    expect(page.results.map((r) => r.session_id)).toEqual(all.sessions.slice(10, 20).map((s) => s.session_id));
    expect(page.results.map((r) => r.status)).toEqual(all.sessions.slice(10, 20).map((s) => s.status));
    // Over HTTP: ?results=true&offset=&limit=
    const http = await fetch(`${(await sys.startSupervisor({ http: { host: "127.0.0.1", port: 0 } })).httpUrl}/rollout/task/cheap-24?results=true&offset=22&limit=5`);
    const body = (await http.json()) as TaskStatus;
    expect(body.results.map((r) => r.session_id)).toEqual(all.sessions.slice(22).map((s) => s.session_id));
  }, 150_000);
});
