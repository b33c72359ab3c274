/**
 * Drain and bounded stops, with real processes. A gateway asked to stop
 * (SIGTERM, or a drain request over HTTP) pulls nothing more, finishes what
 * it holds, publishes and leaves; a second signal requeues what is held.
 * `polar up` whose whole process group gets SIGTERM (the embedded
 * nats-server dies with it) exits within seconds.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { connectNats } from "../src/nats/infra.ts";
import { request } from "../src/nats/messages.ts";
import type { SessionResult, TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { spawnPolar, within, type PolarProcess } from "./helpers/cli-process.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const STARTUP_MS = 45_000; // tsx compiles the CLI on a loaded 2-core machine

async function waitTask(sys: TestSystem, taskId: string, until: (st: TaskStatus) => boolean, timeoutMs: number): Promise<TaskStatus> {
  const deadline = Date.now() + timeoutMs;
  let st: TaskStatus | undefined;
  while (Date.now() < deadline) {
    st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: taskId, with_results: true });
    if (until(st)) return st;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`task ${taskId} did not reach the condition within ${timeoutMs} ms: ${JSON.stringify(st?.sessions)}`);
}

async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One real model call through the session's proxy (a shell session with none would end ERROR "no completions"). */
const CALL = `curl -sf "$OPENAI_BASE_URL/chat/completions" -H "authorization: Bearer $OPENAI_API_KEY" -H "content-type: application/json" -d '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}' >/dev/null`;

function task(id: string, command: string, n = 1) {
  return {
    task_id: id,
    instruction: "x",
    num_samples: n,
    timeout_seconds: 120,
    runtime: { backend: "local", kwargs: { isolation: "none" } },
    agent: { harness: "shell", custom_shell: { command } },
  };
}

describe("gateway drain and signals (real processes)", () => {
  let sys: TestSystem;
  let dir: string;
  let supervisorUrl: string;
  const procs: PolarProcess[] = [];
  beforeAll(async () => {
    sys = await startTestSystem();
    supervisorUrl = (await sys.startSupervisor()).httpUrl!;
    dir = await mkdtemp(join(tmpdir(), "polar-drain-"));
  });
  afterEach(async () => {
    await sys.stopGateways();
  });
  afterAll(async () => {
    for (const p of procs) p.signal("SIGKILL", true);
    await sys?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const gatewayProcess = async (nodeId: string, extra: string[] = []) => {
    const p = spawnPolar(["gateway", "--nats", sys.nats.url, "--node-id", nodeId, "--upstream", sys.upstream.url, "--max-run", "1", ...extra], { POLAR_LOG_LEVEL: "warn" });
    procs.push(p);
    await p.waitFor(new RegExp(`gateway ${nodeId}: proxy`), STARTUP_MS);
    return p;
  };

  it("SIGTERM: pulls nothing more, finishes the sessions it holds, publishes them, exits 0", async () => {
    const gw = await gatewayProcess("gw-term");
    await request(sys.client, SUBJECTS.api.submit, task("drain-term", `sleep 2; ${CALL}`, 6));
    await waitTask(sys, "drain-term", (st) => st.sessions.some((s) => s.status === "RUNNING") && st.sessions.some((s) => s.status === "READY"), 30_000);
    gw.signal("SIGTERM");
    const held = Number((await gw.waitFor(/draining (\d+) held sessions/, 10_000))[1]);
    expect(held).toBeGreaterThanOrEqual(2);
    expect(held).toBeLessThan(6);
    expect(await within(gw.exited, 30_000, "gateway exit after SIGTERM")).toBe(0);
    expect(gw.output()).toMatch(/gateway gw-term: left \(drained\)/);
    // Every held session finished here as attempt 1 and was published before the process left.
    const st = await waitTask(sys, "drain-term", (s) => s.results.length === held, 10_000);
    expect(st.results.map((r) => [r.node_id, r.status, r.attempt])).toEqual(Array(held).fill(["gw-term", "COMPLETED", 1]));
    expect(st.status).toBe("running"); // the rest was never pulled by the draining gateway
    // Another gateway runs the rest as their first attempt: no session ran twice.
    await sys.startGateway({ nodeId: "gw-after-term" });
    const done = await waitTask(sys, "drain-term", (s) => s.status === "completed", 60_000);
    expect(done.results.map((r) => r.attempt)).toEqual(Array(6).fill(1));
    expect(done.results.filter((r) => r.node_id === "gw-after-term")).toHaveLength(6 - held);
  }, 150_000);

  it("a second SIGTERM cancels and requeues what is held; another gateway runs it as attempt 2", async () => {
    const marker = join(dir, "second-signal");
    // The first attempt would sleep 4 s; a requeued attempt finds the marker and ends at once.
    const gw = await gatewayProcess("gw-twice");
    await request(sys.client, SUBJECTS.api.submit, task("drain-twice", `${CALL}; if [ ! -e ${marker} ]; then touch ${marker}; sleep 4; fi`));
    await waitTask(sys, "drain-twice", (st) => st.sessions[0].status === "RUNNING", 30_000);
    await waitFor(() => existsSync(marker), 10_000, "first attempt started");
    gw.signal("SIGTERM");
    await gw.waitFor(/draining/, 10_000);
    gw.signal("SIGTERM");
    expect(await within(gw.exited, 30_000, "gateway exit after the second SIGTERM")).toBe(0);
    expect(gw.output()).toMatch(/left \(stopped by a second signal\)/);
    await sys.startGateway({ nodeId: "gw-after-twice" });
    const st = await waitTask(sys, "drain-twice", (s) => s.status === "completed", 30_000);
    expect(st.results.map((r) => [r.node_id, r.status, r.attempt])).toEqual([["gw-after-twice", "COMPLETED", 2]]);
  }, 120_000);

  it("drain over HTTP and NATS: typed errors for bad requests; the timeout requeues what is still held", async () => {
    const gw = await sys.startGateway({ nodeId: "gw-http", limits: { maxRunWorkers: 1 } });
    const marker = join(dir, "http-drain");
    await request(sys.client, SUBJECTS.api.submit, task("drain-http", `${CALL}; if [ ! -e ${marker} ]; then touch ${marker}; sleep 60; fi`));
    await waitTask(sys, "drain-http", (st) => st.sessions[0].status === "RUNNING", 30_000);

    const bad = await fetch(`${supervisorUrl}/rollout/nodes/gw-http/drain`, { method: "POST", body: JSON.stringify({ timeout_seconds: -1 }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: "validation", message: expect.stringContaining("timeout_seconds") });
    const missing = await fetch(`${supervisorUrl}/rollout/nodes/gw-nobody/drain`, { method: "POST" });
    expect(missing.status).toBe(404);
    await expect(request(sys.client, SUBJECTS.api.nodeDrain, { node_id: "gw-nobody" })).rejects.toMatchObject({ code: "not_found" });

    const ok = await fetch(`${supervisorUrl}/rollout/nodes/gw-http/drain`, { method: "POST", body: JSON.stringify({ timeout_seconds: 1 }) });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ node_id: "gw-http", draining: true, held_sessions: 1, timeout_seconds: 1 });
    // The node reports draining, then leaves at the drain timeout with the session requeued (not failed).
    expect(await within(gw.closed, 20_000, "drained gateway")).toBe("drain timeout");
    await sys.startGateway({ nodeId: "gw-after-http" });
    const st = await waitTask(sys, "drain-http", (s) => s.status === "completed", 30_000);
    expect(st.results.map((r) => [r.node_id, r.status, r.attempt])).toEqual([["gw-after-http", "COMPLETED", 2]]);
    const results = st.results as SessionResult[];
    expect(results[0].error ?? null).toBeNull();
  }, 120_000);
});

describe("polar up stops within seconds", () => {
  it("when its whole process group gets SIGTERM (the embedded nats-server dies first), with a session running", async () => {
    const dir = await mkdtemp(join(tmpdir(), "polar-up-stop-"));
    try {
      const state = join(dir, "up.json");
      const up = spawnPolar(["up", "--http-port", "0"], { POLAR_STATE_FILE: state });
      try {
        const [, natsUrl] = await up.waitFor(/NATS\s+(nats:\/\/\S+)/, STARTUP_MS);
        await up.waitFor(/ready; Ctrl-C/, STARTUP_MS);
        // polar up's server requires credentials: the trainer's are in its state file
        const creds = JSON.parse(readFileSync(state, "utf8")).nats_credentials.trainer;
        const nc = await connectNats(natsUrl, "test-up-stop", creds);
        await request(nc, SUBJECTS.api.submit, task("up-stop", "sleep 300"));
        await waitFor(async () => (await request<TaskStatus>(nc, SUBJECTS.api.get, { task_id: "up-stop", with_results: true })).sessions[0].status === "RUNNING", 30_000, "session running");
        await nc.close();
        up.signal("SIGTERM", true);
        // Before bounded stops this took over 15 minutes; a stop step now waits at most 10 s.
        const code = await within(up.exited, 30_000, "polar up exit");
        expect(code).toBe(0);
        await waitFor(() => !up.groupAlive(), 10_000, "every process of the group gone");
        expect(existsSync(state)).toBe(false);
      } finally {
        up.signal("SIGKILL", true);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
