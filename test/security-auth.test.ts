/**
 * Authenticated actors: `up()` starts its nats-server with one user per role
 * and subject permissions; the HTTP API takes bearer tokens; a SessionResult
 * counts only from the attempt's lease holder. Each forged or unauthorised
 * publish/request is refused and changes nothing. Plus token, NKey and TLS
 * (a CA made here with openssl) on a real nats-server.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { up, type UpHandle } from "../src/app/up.ts";
import { connectNats } from "../src/nats/infra.ts";
import { startNatsServer } from "../src/nats/launcher.ts";
import { request } from "../src/nats/messages.ts";
import { decode, encode, makeHeaders } from "../src/protocol/codec.ts";
import type { PolarError } from "../src/protocol/errors.ts";
import { emptyTiming, SessionLease, type SessionResult, type TaskStatus } from "../src/protocol/schemas.ts";
import { BUCKETS, CONTENT_TYPES, STREAMS, SUBJECTS, leaseKey } from "../src/protocol/subjects.ts";
import { createNkeyUser } from "../src/security/nats-auth.ts";
import { sha256Hex, verifyResultSource } from "../src/security/result-auth.ts";
import { PolarClient } from "../src/client/index.ts";
import { silentLogger } from "../src/util/log.ts";

const CLIENT = fileURLToPath(new URL("../config/examples/chat-client.mjs", import.meta.url));
const TRAINER_TOKEN = "trainer-token-0123456789abcdef";
const OBSERVER_TOKEN = "observer-token-0123456789abcdef";

let sys: UpHandle;
let dir: string;
let trainer: NatsConnection;
let gateway: NatsConnection;
let admin: NatsConnection;
let api: string;

function task(task_id: string, command: string) {
  return {
    task_id,
    instruction: "say hello",
    num_samples: 1,
    timeout_seconds: 60,
    runtime: { backend: "local", kwargs: { isolation: "none" } },
    agent: { harness: "shell", custom_shell: { command, env: { TURNS: "1" } } },
  };
}

async function streamCount(stream: string): Promise<number> {
  return (await (await jetstreamManager(admin)).streams.info(stream)).state.messages;
}

async function get(taskId: string): Promise<TaskStatus> {
  return request<TaskStatus>(trainer, SUBJECTS.api.get, { task_id: taskId, with_results: true });
}

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits until the supervisor's results consumer has handled everything in POLAR_RESULTS. */
async function resultsDrained(): Promise<void> {
  const jsm = await jetstreamManager(admin);
  await until("the results consumer to catch up", async () => {
    const c = await jsm.consumers.info(STREAMS.results, "polar-supervisor");
    return c.num_pending === 0 && c.num_ack_pending === 0 ? true : undefined;
  });
}

function forged(sessionId: string, taskId: string, extra: Partial<SessionResult> = {}): SessionResult {
  const trace = { prompt_ids: [1, 2, 3], response_ids: [4, 5], loss_mask: [1, 1], reward: 1 };
  return {
    session_id: sessionId, task_id: taskId, status: "COMPLETED",
    trajectory: { status: "COMPLETED", metadata: {}, traces: [trace], error: null },
    timing: emptyTiming(), node_id: "gw-forger", error: null, metadata: {}, attempt: 1, ...extra,
  } as SessionResult;
}

/** A JetStream publish; resolves "stored" or the refusal's message. */
async function tryPublish(nc: NatsConnection, subject: string, body: unknown): Promise<string> {
  try {
    await jetstream(nc).publish(subject, encode(body), { headers: makeHeaders(CONTENT_TYPES.msgpack), timeout: 2000 });
    return "stored";
  } catch (err) {
    return String((err as Error).message);
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "polar-sec-auth-"));
  sys = await up({ log: silentLogger(), supervisor: { http: { host: "127.0.0.1", port: 0 }, apiTokens: { trainer: [TRAINER_TOKEN], observer: [OBSERVER_TOKEN] } } });
  api = sys.supervisor.httpUrl!;
  trainer = await connectNats(sys.natsUrl, "test-trainer", sys.credentials!.trainer);
  gateway = await connectNats(sys.natsUrl, "test-gateway", sys.credentials!.gateway);
  admin = await connectNats(sys.natsUrl, "test-admin", sys.credentials!.supervisor);
}, 30_000);

afterAll(async () => {
  for (const nc of [trainer, gateway, admin]) await nc?.close().catch(() => {});
  await sys?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("NATS roles of polar up", () => {
  it("refuses connections without credentials or with a wrong password", async () => {
    await expect(connectNats(sys.natsUrl, "anon", undefined)).rejects.toThrow(/Authorization/i);
    await expect(connectNats(sys.natsUrl, "bad", { user: "polar-trainer", password: "guess" })).rejects.toThrow(/Authorization/i);
  });

  it("a trainer submits, follows its task and reads its traces", async () => {
    const reply = await request<{ total_sessions: number }>(trainer, SUBJECTS.api.submit, task("auth-run", `node ${JSON.stringify(CLIENT)}`));
    expect(reply.total_sessions).toBe(1);
    const st = await until("auth-run to finish", async () => ((await get("auth-run")).status === "completed" ? get("auth-run") : undefined));
    expect(st.sessions[0].status).toBe("COMPLETED");
    // the trainer's own client reads the traces and results over JetStream with the trainer's credentials
    const client = await PolarClient.connect({ nats: sys.natsUrl, auth: sys.credentials!.trainer });
    try {
      const group = await (await client.task("auth-run")).group();
      expect(group.sessions[0]).toMatchObject({ status: "COMPLETED" });
      expect(group.sessions[0].traces.length).toBe(st.sessions[0].trace_count);
    } finally {
      await client.close();
    }
  });

  it("refuses the forged COMPLETED result with reward 1 from a trainer, and from a connection without credentials; nothing changes", async () => {
    await request(trainer, SUBJECTS.api.submit, task("auth-held", "sleep 30"));
    const st = await until("auth-held to run", async () => {
      const s = await get("auth-held");
      return s.sessions[0].status === "RUNNING" ? s : undefined;
    });
    const sid = st.sessions[0].session_id;
    const [results, traces] = [await streamCount(STREAMS.results), await streamCount(STREAMS.traces)];
    expect(await tryPublish(trainer, SUBJECTS.result("auth-held"), forged(sid, "auth-held"))).toMatch(/permission/i);
    expect(await tryPublish(trainer, SUBJECTS.dispatch("default"), { session_id: "x" })).toMatch(/permission/i);
    // the trainer may not remove data either
    const jsm = await jetstreamManager(trainer);
    await expect(jsm.streams.purge(STREAMS.traces)).rejects.toThrow(/permission/i);
    // an observer may read but not submit
    const observer = await connectNats(sys.natsUrl, "test-observer", sys.credentials!.observer);
    try {
      expect((await request<TaskStatus>(observer, SUBJECTS.api.get, { task_id: "auth-held", with_results: true })).task_id).toBe("auth-held");
      const err = (await request(observer, SUBJECTS.api.submit, task("auth-obs", "true"), { timeoutMs: 2000 }).catch((e) => e)) as Error;
      expect(err.message).toMatch(/permission/i);
    } finally {
      await observer.close();
    }
    await resultsDrained();
    expect(await streamCount(STREAMS.results)).toBe(results);
    expect(await streamCount(STREAMS.traces)).toBe(traces);
    expect((await get("auth-held")).sessions[0]).toMatchObject({ session_id: sid, status: "RUNNING", reward: null });
    await expect(get("auth-obs")).rejects.toMatchObject({ code: "not_found" });
    await request(trainer, SUBJECTS.api.cancel, { task_id: "auth-held" });
  });

  it("accepts a gateway's result only from the lease holder with its token; the supervisor's own subject is closed to gateways", async () => {
    await request(trainer, SUBJECTS.api.submit, task("auth-lease", "sleep 30"));
    const st = await until("auth-lease to run", async () => {
      const s = await get("auth-lease");
      return s.sessions[0].status === "RUNNING" ? s : undefined;
    });
    const sid = st.sessions[0].session_id;
    const now = new Date().toISOString();
    const lease: SessionLease = {
      session_id: sid, task_id: "auth-lease", attempt: 1, node_id: "gw-holder", init_at: now, deadline_at: now,
      token_sha256: sha256Hex("the-holders-token"), updated_at: now,
    };
    const leases = await new Kvm(gateway).open(BUCKETS.leases);
    await leases.put(leaseKey(sid), encode(lease));
    const traces = await streamCount(STREAMS.traces);
    const attempts = [
      forged(sid, "auth-lease", { node_id: "gw-other", lease_token: "the-holders-token" }),
      forged(sid, "auth-lease", { node_id: "gw-holder", lease_token: "a-guessed-token" }),
      forged(sid, "auth-lease", { node_id: "gw-holder" }),
      forged(sid, "auth-lease", { node_id: "gw-holder", attempt: 2, lease_token: "the-holders-token" }),
    ];
    for (const r of attempts) expect(await tryPublish(gateway, SUBJECTS.result("auth-lease"), r)).toBe("stored");
    expect(await tryPublish(gateway, SUBJECTS.supervisorResult("auth-lease"), forged(sid, "auth-lease"))).toMatch(/permission/i);
    await resultsDrained();
    expect((await get("auth-lease")).sessions[0]).toMatchObject({ status: "RUNNING", reward: null, trace_count: 0 });
    expect(await streamCount(STREAMS.traces)).toBe(traces);
    // the holder's own result is accepted
    expect(await tryPublish(gateway, SUBJECTS.result("auth-lease"), forged(sid, "auth-lease", { node_id: "gw-holder", lease_token: "the-holders-token" }))).toBe("stored");
    const done = await until("the holder's result", async () => ((await get("auth-lease")).sessions[0].status === "COMPLETED" ? get("auth-lease") : undefined));
    expect(done.sessions[0]).toMatchObject({ node_id: "gw-holder", reward: 1, trace_count: 1 });
    await request(trainer, SUBJECTS.api.cancel, { task_id: "auth-lease" }).catch(() => undefined);
  });

  it("a valid gateway credential cannot forge the result of a session the real gateway holds, nor of a queued one; nothing changes", async () => {
    const go = join(dir, "forge-go");
    await request(trainer, SUBJECTS.api.submit, task("auth-forge", `while [ ! -e ${go} ]; do sleep 0.1; done; node ${JSON.stringify(CLIENT)}`));
    const st = await until("auth-forge to run", async () => {
      const s = await get("auth-forge");
      return s.sessions[0].status === "RUNNING" ? s : undefined;
    });
    const sid = st.sessions[0].session_id;
    // The real gateway took the session's lease when it started it.
    const leases = await new Kvm(gateway).open(BUCKETS.leases);
    const lease = SessionLease.parse(decode((await leases.get(leaseKey(sid)))!.value));
    expect(lease).toMatchObject({ session_id: sid, task_id: "auth-forge", attempt: 1, node_id: st.sessions[0].node_id });
    // A session nobody started has no lease.
    await request(trainer, SUBJECTS.api.submit, { ...task("auth-forge-queued", "true"), pool: "nobody-forge" });
    const queued = (await get("auth-forge-queued")).sessions[0].session_id;
    const leased = async (id: string) => (await leases.get(leaseKey(id)))?.operation === "PUT";
    expect(await leased(queued)).toBe(false);

    const traces = await streamCount(STREAMS.traces);
    const forgeries = [
      forged(sid, "auth-forge", { node_id: lease.node_id }), // the holder's node id, no token
      forged(sid, "auth-forge", { node_id: lease.node_id, lease_token: "a-guessed-token" }),
      forged(sid, "auth-forge", { node_id: "gw-forger", lease_token: "a-guessed-token" }),
      forged(queued, "auth-forge-queued", { node_id: lease.node_id }),
    ];
    for (const r of forgeries) expect(await tryPublish(gateway, SUBJECTS.result(r.task_id), r)).toBe("stored");
    await resultsDrained();
    const held = await get("auth-forge");
    expect(held).toMatchObject({ status: "running", completed_sessions: 0 });
    expect(held.sessions[0]).toMatchObject({ session_id: sid, status: "RUNNING", reward: null, trace_count: 0 });
    const q = await get("auth-forge-queued");
    expect(q).toMatchObject({ status: "running", completed_sessions: 0 });
    expect(q.sessions[0].reward).toBeNull();
    expect(await streamCount(STREAMS.traces)).toBe(traces);

    // The holder's own result still lands, once, with the trace it really made.
    await writeFile(go, "");
    const done = await until("the real result", async () => {
      const s = await get("auth-forge");
      return s.status === "completed" ? s : undefined;
    });
    expect(done.results.map((r) => [r.session_id, r.node_id, r.attempt, r.status])).toEqual([[sid, lease.node_id, 1, "COMPLETED"]]);
    expect(done.sessions[0].trace_count).toBe(1);
    expect(await streamCount(STREAMS.traces)).toBe(traces + 1);
    // Marked finished once the result was recorded: no redelivered attempt may take the session again.
    expect(SessionLease.parse(decode((await leases.get(leaseKey(sid)))!.value))).toMatchObject({ attempt: 1, node_id: lease.node_id, finished_at: expect.any(String) });
    await request(trainer, SUBJECTS.api.cancel, { task_id: "auth-forge-queued" });
  }, 90_000);

  it("with leases required, a session without a lease accepts no gateway result", async () => {
    const leases = await new Kvm(admin).open(BUCKETS.leases);
    const r = forged("ses-unleased", "t-unleased");
    expect(await verifyResultSource(leases, SUBJECTS.result("t-unleased"), r, { requireLease: true })).toEqual({ ok: false, reason: "no lease is held for this session" });
    expect(await verifyResultSource(leases, SUBJECTS.result("t-other"), r, { requireLease: false })).toMatchObject({ ok: false });
    expect(await verifyResultSource(leases, SUBJECTS.supervisorResult("t-unleased"), r, { requireLease: true })).toEqual({ ok: true, via: "supervisor" });
  });

  it("a gateway may not dispatch sessions or write task records", async () => {
    expect(await tryPublish(gateway, SUBJECTS.dispatch("default"), { session_id: "x" })).toMatch(/permission/i);
    const tasks = await new Kvm(gateway).open(BUCKETS.tasks);
    await expect(tasks.put("auth-run", encode({ forged: true }))).rejects.toThrow(/permission/i);
    expect((await get("auth-run")).status).toBe("completed");
  });
});

describe("HTTP API bearer tokens", () => {
  const submit = (headers: Record<string, string>, id: string) =>
    fetch(`${api}/rollout/task/submit`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(task(id, "true")) });

  it("answers 401 without or with an unknown token, 403 to an observer's write, in the API's error format; nothing is stored", async () => {
    const none = await submit({}, "http-anon");
    expect(none.status).toBe(401);
    expect(((await none.json()) as any).error).toMatchObject({ code: "unauthorized", retryable: false });
    const wrong = await submit({ authorization: "Bearer not-a-token" }, "http-anon");
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as any).error.message).toContain("unknown bearer token");
    const obs = await submit({ authorization: `Bearer ${OBSERVER_TOKEN}` }, "http-anon");
    expect(obs.status).toBe(403);
    expect(((await obs.json()) as any).error.code).toBe("forbidden");
    expect((await fetch(`${api}/rollout/status`)).status).toBe(401);
    expect((await fetch(`${api}/events`)).status).toBe(401);
    const read = await fetch(`${api}/rollout/task/http-anon`, { headers: { authorization: `Bearer ${OBSERVER_TOKEN}` } });
    expect(read.status).toBe(404);
    expect((await fetch(`${api}/health`)).status).toBe(200);
  });

  it("a trainer token submits", async () => {
    const ok = await submit({ authorization: `Bearer ${TRAINER_TOKEN}` }, "http-ok");
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ task_id: "http-ok", total_sessions: 1 });
  });

  it("refuses to serve beyond loopback without a token", async () => {
    const nc = await connectNats(sys.natsUrl, "test-sup2", sys.credentials!.supervisor);
    try {
      const { startSupervisor } = await import("../src/actors/supervisor/index.ts");
      await expect(startSupervisor({ nc, log: silentLogger() }, { http: { host: "0.0.0.0", port: 0 } })).rejects.toThrow(/not loopback, without a bearer token/);
    } finally {
      await nc.close();
    }
  });
});

describe("NATS authentication methods", () => {
  it("token and NKey users", async () => {
    const tok = await startNatsServer({ auth: { token: "s3cret-token" } });
    try {
      await expect(connectNats(tok.url, "anon", undefined)).rejects.toThrow(/Authorization/i);
      const nc = await connectNats(tok.url, "tok", { token: "s3cret-token" });
      await nc.close();
    } finally {
      await tok.stop();
    }
    const nk = createNkeyUser();
    const seedFile = join(dir, "user.nk");
    await writeFile(seedFile, nk.seed, { mode: 0o600 });
    const other = createNkeyUser();
    const srv = await startNatsServer({ auth: [{ role: "observer", nkey: nk.publicKey }] });
    try {
      const nc = await connectNats(srv.url, "nkey", { nkey_seed_file: seedFile });
      expect(nc.info?.jetstream).toBe(true);
      await nc.close();
      const otherFile = join(dir, "other.nk");
      await writeFile(otherFile, other.seed);
      await expect(connectNats(srv.url, "other", { nkey_seed_file: otherFile })).rejects.toThrow(/Authorization/i);
    } finally {
      await srv.stop();
    }
  });

  it("TLS with a locally generated CA: a client that trusts the CA connects, one that does not is refused", async () => {
    const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=polar-test-ca", "-keyout", "ca.key", "-out", "ca.pem");
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr");
    await writeFile(join(dir, "san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1", "-extfile", "san.ext", "-out", "server.pem");
    const srv = await startNatsServer({
      tls: { cert_file: join(dir, "server.pem"), key_file: join(dir, "server.key") },
      auth: [{ role: "trainer", user: "t", password: "pw" }],
    });
    try {
      const nc = await connectNats(srv.url, "tls", { user: "t", password: "pw", tls_ca_file: join(dir, "ca.pem") });
      expect(nc.info?.tls_required).toBe(true);
      await nc.close();
      await expect(connectNats(srv.url, "untrusted", { user: "t", password: "pw" })).rejects.toThrow();
    } finally {
      await srv.stop();
    }
  });
});
