/**
 * The trainer client (`import { PolarClient } from "polar"`) against the real
 * system: submit, results, traces with replay and resume, the GRPO group,
 * cancel and typed errors, over NATS and over the HTTP API only (server-sent
 * events), and a NATS connection cut mid-stream.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PolarClient, PolarError, grpoAdvantages, type TraceMessage } from "../src/client/index.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";
import { startTcpProxy, type TcpProxy } from "./helpers/tcp-proxy.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { contentTypeOf, decode } from "../src/protocol/codec.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLIENT = join(ROOT, "config/examples/chat-client.mjs");

/** 2 model calls per session (per_request: 2 traces); samples 0 and 1 get reward 1, the others 0. */
function task(task_id: string, num_samples = 4, extra: Record<string, unknown> = {}, env: Record<string, string> = {}) {
  return {
    task_id,
    instruction: `Task ${task_id}: say hello.`,
    num_samples,
    timeout_seconds: 60,
    runtime: { backend: "local" },
    agent: {
      harness: "shell",
      custom_shell: { command: `node ${JSON.stringify(CLIENT)} && echo $POLAR_SAMPLE_INDEX > idx.txt`, env: { TURNS: "2", ...env } },
    },
    builder: { strategy: "per_request" },
    evaluator: { strategy: "command", config: { command: 'test "$(cat idx.txt)" -lt 2' } },
    ...extra,
  };
}

const key = (m: TraceMessage) => `${m.session_id}:${m.attempt}:${m.trace_index}`;

async function collect<T>(it: AsyncIterable<T>, limit = Infinity): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) {
    out.push(x);
    if (out.length >= limit) break;
  }
  return out;
}

describe("PolarClient", () => {
  let sys: TestSystem;
  let api: string;
  let client: PolarClient;

  beforeAll(async () => {
    sys = await startTestSystem();
    api = (await sys.startSupervisor()).httpUrl!;
    await sys.startGateway();
    client = await PolarClient.connect({ nats: sys.nats.url });
  });
  afterAll(async () => {
    await client?.close();
    await sys?.stop();
  });

  it("over NATS: results as they land, every trace once, and the GRPO group", async () => {
    const h = await client.submit(task("cl-nats"));
    expect(h.totalSessions).toBe(4);
    const [results, traces] = await Promise.all([collect(h.results()), collect(h.traces())]);
    expect(new Set(results.map((r) => r.session_id)).size).toBe(4);
    expect(results.every((r) => r.status === "COMPLETED")).toBe(true);
    expect(traces).toHaveLength(8);
    expect(new Set(traces.map(key)).size).toBe(8);
    // Each trace is the one its session's result carries.
    for (const m of traces) {
      const r = results.find((x) => x.session_id === m.session_id)!;
      expect(m.trace.response_ids).toEqual(r.trajectory.traces[m.trace_index].response_ids);
      expect(m.trace.loss_mask).toEqual(m.trace.response_ids.map(() => 1));
    }
    const g = await h.group();
    expect(g.status).toBe("completed");
    expect(g.sessions.map((s) => s.sample_index)).toEqual([0, 1, 2, 3]);
    expect(g.sessions.map((s) => s.reward)).toEqual([1, 1, 0, 0]);
    expect(g.sessions.map((s) => s.traces.length)).toEqual([2, 2, 2, 2]);
    expect(g.sessions[0].advantage).toBeCloseTo(1, 4);
    expect(g.sessions[3].advantage).toBeCloseTo(-1, 4);
    expect(g.stale_traces).toBe(0);
  });

  it("replays a finished task's traces to a new client, and resumes from a sequence", async () => {
    const first = await client.submit(task("cl-replay", 3));
    const all = await collect(first.traces());
    expect(all).toHaveLength(6);
    const other = await PolarClient.connect({ nats: sys.nats.url });
    try {
      const h = await other.task("cl-replay");
      const replay = await collect(h.traces());
      expect(replay.map(key).sort()).toEqual(all.map(key).sort());
      const seqs = replay.map((m) => m.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
      const rest = await collect(h.traces({ fromSeq: seqs[2] + 1 }));
      expect(rest.map((m) => m.seq)).toEqual(seqs.slice(3));
      const none = await collect(h.traces({ fromSeq: seqs.at(-1)! + 1 }));
      expect(none).toEqual([]);
      expect((await h.group()).sessions).toHaveLength(3);
    } finally {
      await other.close();
    }
  });

  it("over the HTTP API only: submit, results and traces as server-sent events, group, resume", async () => {
    const http = await PolarClient.connect({ api });
    const h = await http.submit(task("cl-http", 2));
    const [results, traces] = await Promise.all([collect(h.results()), collect(h.traces())]);
    expect(results.map((r) => r.session_id).sort()).toEqual((await h.status()).sessions.map((s) => s.session_id).sort());
    expect(traces).toHaveLength(4);
    expect(new Set(traces.map(key)).size).toBe(4);
    const g = await h.group();
    expect(g.sessions.map((s) => [s.reward, s.advantage])).toEqual([[1, 0], [1, 0]]);
    const rest = await collect(h.traces({ fromSeq: traces[1].seq + 1 }));
    expect(rest.map(key)).toEqual(traces.slice(2).map(key));
    // The same stream read with plain fetch and Last-Event-ID.
    const res = await fetch(`${api}/rollout/task/cl-http/traces`, { headers: { "last-event-id": String(traces[2].seq) } });
    const text = await res.text();
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(text.match(/^event: trace$/gm)).toHaveLength(1);
    expect(text).toContain(`id: ${traces[3].seq}\n`);
    expect(text.trimEnd().endsWith('data: {"task_id":"cl-http"}')).toBe(true);
  });

  it("unknown task ids and bad tasks are typed errors on both transports", async () => {
    const http = await PolarClient.connect({ api });
    for (const c of [client, http]) {
      const err = await c.task("no-such-task").catch((e) => e);
      expect(err).toBeInstanceOf(PolarError);
      expect(err.code).toBe("not_found");
      expect(err.retryable).toBe(false);
      const bad = await c.submit({ task_id: "bad task", instruction: "x" }).catch((e) => e);
      expect(bad.code).toBe("validation");
      expect(JSON.stringify(bad.details)).toContain("agent");
    }
    const res = await fetch(`${api}/rollout/task/no-such-task/traces`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("not_found");
    const bad = await fetch(`${api}/rollout/task/no-such-task/traces?from_seq=-3`);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("validation");
  });

  it("cancel: the group resolves with every session ended", async () => {
    const h = await client.submit(task("cl-cancel", 2, {}, { DELAY_MS: "20000" }));
    await new Promise((r) => setTimeout(r, 300));
    const st = await h.cancel();
    expect(["cancelling", "cancelled"]).toContain(st.status);
    const g = await h.group();
    expect(g.status).toBe("cancelled");
    expect(g.sessions.map((s) => s.status)).toEqual(["ERROR", "ERROR"]);
    expect(g.sessions.map((s) => s.reward)).toEqual([0, 0]);
  });

  it("reads a task of several status pages: group(), wait(), status() and task() hold every session once", async () => {
    // 5 sessions, 2 summaries per status request: pages at offsets 0, 2 and 4.
    const paged = await PolarClient.connect({ nats: sys.nats.url, statusPageSize: 2 });
    const http = await PolarClient.connect({ api, statusPageSize: 2 });
    // Every status request of the NATS client, seen by a plain subscriber next to the supervisor's queue group.
    const pages: Array<[number | undefined, number | undefined]> = [];
    const sub = sys.client.subscribe(SUBJECTS.api.get, {
      callback: (_err, msg) => {
        const q = decode(msg.data, contentTypeOf(msg.headers)) as { task_id: string; offset?: number; limit?: number };
        if (q.task_id === "cl-paged") pages.push([q.offset, q.limit]);
      },
    });
    await sys.client.flush();
    try {
      const h = await paged.submit(task("cl-paged", 5, {}, { TURNS: "1" }));
      const g = await h.group();
      const rewards = [1, 1, 0, 0, 0];
      const mean = 2 / 5;
      const std = Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / 5);
      expect(g.status).toBe("completed");
      expect(g.sessions.map((s) => s.sample_index)).toEqual([0, 1, 2, 3, 4]);
      expect(new Set(g.sessions.map((s) => s.session_id)).size).toBe(5);
      expect(g.sessions.map((s) => s.reward)).toEqual(rewards);
      g.sessions.forEach((s, i) => expect(s.advantage).toBeCloseTo((rewards[i] - mean) / (std + 1e-6), 6));
      expect(g.sessions.map((s) => s.traces.length)).toEqual([1, 1, 1, 1, 1]);
      const ids = g.sessions.map((s) => s.session_id);
      expect((await h.wait()).sessions.map((s) => s.session_id)).toEqual(ids);
      await sys.client.flush();
      // The sessions before the first stream read, the final status of group() and of wait(): pages at offsets 0, 2, 4 each time.
      expect(pages.filter(([o]) => o === 4)).toHaveLength(3);
      expect(pages.every(([o, l]) => [0, 2, 4].includes(o!) && l === 2)).toBe(true);

      const again = await http.task("cl-paged");
      expect(again.totalSessions).toBe(5);
      const st = await again.status();
      expect(st.sessions.map((s) => s.session_id)).toEqual(ids);
      expect([st.offset, st.limit]).toEqual([0, 5]);
      const g2 = await again.group();
      expect(g2.sessions.map((s) => [s.session_id, s.reward, s.advantage])).toEqual(g.sessions.map((s) => [s.session_id, s.reward, s.advantage]));
    } finally {
      sub.unsubscribe();
      await paged.close();
      await http.close();
    }
  }, 120_000);

  it("a status page size outside [1, 10000] is a validation error", async () => {
    for (const statusPageSize of [0, 10_001, 2.5]) {
      for (const opts of [{ nats: sys.nats.url, statusPageSize }, { api, statusPageSize }]) {
        const err = await PolarClient.connect(opts).catch((e) => e);
        expect(err).toBeInstanceOf(PolarError);
        expect(err.code).toBe("validation");
        expect(err.message).toContain("statusPageSize");
      }
    }
  });

  describe("a NATS connection cut mid-stream", () => {
    let proxy: TcpProxy;
    beforeAll(async () => {
      proxy = await startTcpProxy({ host: "127.0.0.1", port: sys.nats.port });
    });
    afterAll(async () => proxy?.stop());

    it("loses no trace and delivers none twice", async () => {
      await collect((await client.submit(task("cl-cut", 4, {}, { TURNS: "3" }))).traces());
      const c = await PolarClient.connect({ nats: proxy.url });
      try {
        const h = await c.task("cl-cut");
        const got: TraceMessage[] = [];
        for await (const m of h.traces()) {
          got.push(m);
          if (got.length === 3) expect(proxy.cut()).toBeGreaterThan(0);
        }
        expect(got).toHaveLength(12);
        expect(new Set(got.map(key)).size).toBe(12);
        expect(new Set(got.map((m) => m.seq)).size).toBe(12);
      } finally {
        await c.close();
      }
    });
  });

  it("close() right after the connection dropped resolves; a call on the closed client is a typed unavailable error", async () => {
    for (const drop of ["cut", "server gone"]) {
      const proxy = await startTcpProxy({ host: "127.0.0.1", port: sys.nats.port });
      try {
        const c = await PolarClient.connect({ nats: proxy.url });
        expect((await c.task("cl-close-unknown").catch((e) => e)).code).toBe("not_found");
        if (drop === "cut") expect(proxy.cut()).toBeGreaterThan(0);
        else await proxy.stop();
        await c.close();
        const err = await c.task("cl-close-unknown").catch((e) => e);
        expect(err).toBeInstanceOf(PolarError);
        expect([err.code, err.retryable]).toEqual(["unavailable", true]);
      } finally {
        await proxy.stop();
      }
    }
  });

  it("polar submit --wait follows results as they land and writes every trace", async () => {
    const dir = await mkdtemp(join(tmpdir(), "polar-submit-"));
    await writeFile(join(dir, "task.json"), JSON.stringify(task("cl-cli", 2)));
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, "bin/polar.js"), "submit", join(dir, "task.json"), "--wait", "--out", join(dir, "t.jsonl"), "--nats", sys.nats.url],
      { timeout: 60_000 },
    );
    expect(stdout).toContain("submitted cl-cli: 2 sessions");
    // Not a TTY: plain progress lines, always the last one.
    expect(stdout).toMatch(/^2\/2 sessions · COMPLETED 2 · \d+\.\ds$/m);
    expect(stdout).toContain("task cl-cli: completed");
    expect(stdout).toContain("wrote 4 traces");
    const lines = (await readFile(join(dir, "t.jsonl"), "utf8")).trim().split("\n").map((l) => JSON.parse(l));
    expect(new Set(lines.map((l) => `${l.session_id}:${l.trace_index}`)).size).toBe(4);
  });

  it("grpoAdvantages", () => {
    expect(grpoAdvantages([])).toEqual([]);
    expect(grpoAdvantages([0.5])).toEqual([0]);
    expect(grpoAdvantages([1, 0], false)).toEqual([0.5, -0.5]);
    const a = grpoAdvantages([1, 1, 0, 0]);
    expect(a[0]).toBeCloseTo(1, 5);
    expect(a.reduce((x, y) => x + y, 0)).toBeCloseTo(0, 9);
  });
});
