/**
 * Host files, callbacks and malformed paths, against a real nats-server,
 * supervisor, gateway and proxy: `upload_*` sources outside the upload roots
 * (with `../` and symlinks) are refused at submit and at the gateway,
 * callbacks only reach allowed places (no redirect to a refused one), and
 * malformed percent-encoding is a 400 in the caller's format, never a 500.
 */
import { createServer as createTcpServer, type Socket } from "node:net";
import { createServer } from "node:http";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import type { PolarError } from "../src/protocol/errors.ts";
import type { TaskStatus } from "../src/protocol/schemas.ts";
import { STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import { DEFAULT_CALLBACK, postCallback } from "../src/actors/supervisor/callback.ts";
import { LocalRuntime } from "../src/runtimes/local.ts";
import { runPrepare } from "../src/runtimes/prepare.ts";
import { listen, closeServer, readBody } from "../src/util/http.ts";
import { silentLogger } from "../src/util/log.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const CLIENT = fileURLToPath(new URL("../config/examples/chat-client.mjs", import.meta.url));
const log = silentLogger();

let sys: TestSystem;
let api: string;
let proxy: string;
let root: string;
let allowed: string;
let secret: string;

function task(task_id: string, extra: Record<string, unknown> = {}, prepare: unknown[] = []) {
  return {
    task_id,
    instruction: "say hello",
    num_samples: 1,
    timeout_seconds: 60,
    runtime: { backend: "local", prepare },
    agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(CLIENT)}`, env: { TURNS: "1" } } },
    ...extra,
  };
}

async function messages(stream: string): Promise<number> {
  const r = await sys.client.request(`$JS.API.STREAM.INFO.${stream}`);
  return JSON.parse(new TextDecoder().decode(r.data)).state.messages;
}

async function submitHttp(body: unknown) {
  const res = await fetch(`${api}/rollout/task/submit`, { method: "POST", body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as any };
}

async function waitDone(taskId: string): Promise<TaskStatus> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: taskId, with_results: true }).catch(() => undefined);
    if (st && ["completed", "failed", "cancelled"].includes(st.status)) return st;
    if (Date.now() > deadline) throw new Error(`task ${taskId} not done`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "polar-sec-input-"));
  allowed = join(root, "allowed");
  await mkdir(join(allowed, "dir"), { recursive: true });
  await writeFile(join(allowed, "ok.txt"), "fine to share\n");
  secret = join(root, "secret.txt");
  await writeFile(secret, "CANARY-host-secret-4711\n");
  await symlink(secret, join(allowed, "link-to-secret"));
  await symlink(root, join(allowed, "link-to-root"));
  sys = await startTestSystem();
  api = (await sys.startSupervisor({ uploadRoots: [allowed] })).httpUrl!;
  proxy = (await sys.startGateway({ uploadRoots: [allowed] })).proxyUrl;
}, 30_000);

afterAll(async () => {
  await sys?.stop();
  if (root) await rm(root, { recursive: true, force: true });
});

describe("upload roots", () => {
  it("refuses at submit every source outside the roots (absolute, ../, symlinks), naming the path, and stores nothing", async () => {
    const queued = await messages(STREAMS.sessions);
    const cases: Array<[string, string]> = [
      ["/etc/passwd", "/etc/passwd"],
      [secret, secret],
      [join(allowed, "..", "secret.txt"), secret],
      [join(allowed, "link-to-secret"), "link-to-secret"],
      [join(allowed, "link-to-root", "secret.txt"), "link-to-root"],
    ];
    for (const [i, [source, named]] of cases.entries()) {
      const r = await submitHttp(task(`up-bad-${i}`, {}, [{ type: "upload_file", source, target: "x" }]));
      expect(r.status, source).toBe(400);
      expect(r.body.error.code).toBe("validation");
      expect(r.body.error.details.issues[0].path).toBe("runtime.prepare.0.source");
      expect(r.body.error.message).toContain(named);
      expect(r.body.error.message).toContain("outside the allowed upload roots");
      const get = await fetch(`${api}/rollout/task/up-bad-${i}`);
      expect(get.status).toBe(404);
    }
    const dir = await submitHttp(task("up-bad-dir", { agent: { harness: "pi", skills_path: root } }));
    expect(dir.status).toBe(400);
    expect(dir.body.error.details.issues.map((x: any) => x.path)).toContain("agent.skills_path");
    expect(await messages(STREAMS.sessions)).toBe(queued);
  });

  it("runs a task whose upload lies under a root", async () => {
    const t = task("up-ok", {}, [{ type: "upload_file", source: join(allowed, "ok.txt"), target: "ok.txt" }]);
    (t.runtime as Record<string, unknown>).kwargs = { isolation: "none" };
    const r = await submitHttp(t);
    expect(r.status).toBe(200);
    const st = await waitDone("up-ok");
    expect(st.sessions[0], JSON.stringify(st.results[0]?.agent_result)).toMatchObject({ status: "COMPLETED" });
  });

  it("the gateway checks again where it copies: a link swapped in after submit is refused, nothing is copied", async () => {
    const sessionDir = join(root, "session-1");
    const rt = new LocalRuntime({ backend: "local", kwargs: { isolation: "none" } } as any, {
      sessionId: "s-up-1", gatewayId: "gw-test", proxy: { url: "http://127.0.0.1:9" }, sessionDir, log,
    } as any);
    await rt.start();
    try {
      const run = (source: string) =>
        runPrepare(rt, [{ type: "upload_file", source, target: "got.txt", max_attempts: 1, retry_backoff_seconds: 0 }], {
          signal: new AbortController().signal, log, uploadRoots: [allowed],
        });
      const err = (await run(join(allowed, "link-to-secret")).catch((e) => e)) as PolarError;
      expect(err.code).toBe("forbidden");
      expect(err.message).toContain(`resolves to ${secret}`);
      await expect(readFile(join(rt.workdir, "got.txt"))).rejects.toThrow(/ENOENT/);
      await run(join(allowed, "ok.txt"));
      expect(await readFile(join(rt.workdir, "got.txt"), "utf8")).toBe("fine to share\n");
    } finally {
      await rt.stop();
    }
  });
});

describe("callbacks", () => {
  it("refuses non-http schemes, link-local addresses and this host's NATS and API ports at submit", async () => {
    const apiPort = new URL(api).port;
    const bad = [
      "file:///etc/passwd",
      "gopher://127.0.0.1:70/x",
      "http://169.254.169.254/latest/meta-data/",
      "http://[fe80::1]/x",
      `http://127.0.0.1:${sys.nats.port}/`,
      `http://localhost:${sys.nats.port}/`,
      `http://127.0.0.1:${apiPort}/rollout/task/submit`,
      "http://user:pw@example.com/",
    ];
    for (const [i, callback_url] of bad.entries()) {
      const r = await submitHttp(task(`cb-bad-${i}`, { callback_url }));
      expect(r.status, callback_url).toBe(400);
      expect(r.body.error.details.issues[0].path).toBe("callback_url");
      expect(r.body.error.message).toContain("is refused");
      expect((await fetch(`${api}/rollout/task/cb-bad-${i}`)).status).toBe(404);
    }
  });

  it("does not follow a redirect to a refused place, and nothing connects to it", async () => {
    const conns: Socket[] = [];
    const trap = createTcpServer((s) => {
      conns.push(s);
      s.destroy();
    });
    await new Promise<void>((r) => trap.listen(0, "127.0.0.1", r));
    const trapPort = (trap.address() as { port: number }).port;
    const hits: string[] = [];
    const redirector = createServer(async (req, res) => {
      await readBody(req, 1 << 20);
      hits.push(req.url ?? "");
      if (req.url === "/to-trap") res.writeHead(307, { location: `http://127.0.0.1:${trapPort}/x` }).end();
      else if (req.url === "/to-metadata") res.writeHead(302, { location: "http://169.254.169.254/latest" }).end();
      else if (req.url === "/to-ok") res.writeHead(308, { location: "/ok" }).end();
      else res.writeHead(200).end("ok");
    });
    const port = await listen(redirector, 0, "127.0.0.1");
    try {
      const opts = { ...DEFAULT_CALLBACK, attempts: 2, backoffMs: 10, policy: { allowHosts: [], localPorts: [trapPort] } };
      const result = { task_id: "t", status: "completed" as const, results: [], result_paths: [] };
      const toTrap = await postCallback(`http://127.0.0.1:${port}/to-trap`, result, opts, log);
      expect(toTrap).toMatchObject({ delivered: false, attempts: 1 });
      expect(toTrap.error).toContain(`port ${trapPort} of this host`);
      const toMeta = await postCallback(`http://127.0.0.1:${port}/to-metadata`, result, opts, log);
      expect(toMeta.error).toContain("link-local");
      const ok = await postCallback(`http://127.0.0.1:${port}/to-ok`, result, opts, log);
      expect(ok).toEqual({ delivered: true, attempts: 1, error: null });
      expect(hits).toEqual(["/to-trap", "/to-metadata", "/to-ok", "/ok"]);
      expect(conns).toHaveLength(0);
      // An allow-list admits only its hosts.
      const listed = { ...opts, policy: { allowHosts: ["example.invalid"], localPorts: [] } };
      expect((await postCallback(`http://127.0.0.1:${port}/ok`, result, listed, log)).error).toContain("not on the callback allow-list");
    } finally {
      await closeServer(redirector);
      trap.close();
    }
  });
});

describe("malformed percent-encoding", () => {
  it("is a 400 in the API's error format from the task API, and the API answers after", async () => {
    for (const path of ["/rollout/task/%E0%A4%A", "/rollout/task/%", "/rollout/task/a%ZZb"]) {
      const res = await fetch(`${api}${path}`);
      expect(res.status, path).toBe(400);
      const body = (await res.json()) as any;
      expect(body.error).toMatchObject({ code: "validation", retryable: false });
      expect(body.error.message).toContain("malformed percent-encoding");
    }
    const res = await fetch(`${api}/rollout/status`);
    expect(res.status).toBe(200);
  });

  it("is a 400 in the vendor's error format from every proxy route, and nothing is recorded", async () => {
    const before = sys.upstream.exchanges.length;
    const post = (path: string) => fetch(`${proxy}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    const chat = await post("/s/%E0%A4%A/v1/chat/completions");
    expect(chat.status).toBe(400);
    expect(((await chat.json()) as any).error.message).toContain("malformed percent-encoding");
    const google = await post("/v1beta/models/%ZZ:generateContent");
    expect(google.status).toBe(400);
    expect(((await google.json()) as any).error).toMatchObject({ code: 400, status: "INVALID_ARGUMENT" });
    const model = await fetch(`${proxy}/v1/models/%E0%A4%A`);
    expect(model.status).toBe(400);
    expect(sys.upstream.exchanges.length).toBe(before);
    expect((await fetch(`${proxy}/health`)).status).toBe(200);
  });
});
