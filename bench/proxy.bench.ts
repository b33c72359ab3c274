/**
 * Proxy benchmark: the latency the capturing proxy adds over calling the same
 * upstream directly, at concurrency 1 and 64, for a ~20 KB chat request, and
 * captured calls per second. The upstream (a canned vLLM-shaped answer with
 * ~5k prompt ids, 256 sampled ids and logprobs) and the proxy each run in a
 * child process; the load generator runs here. Direct and proxied runs are
 * interleaved in rounds so drift hits both alike.
 */
import { fork, type ChildProcess } from "node:child_process";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { Pool } from "undici";

const ROLE = process.env.POLAR_PROXY_BENCH_ROLE;
const SELF = fileURLToPath(import.meta.url);

// ---------------------------------------------------------------- children

function cannedAnswer(): string {
  const prompt = Array.from({ length: 5000 }, (_, i) => (i * 7919) % 151000);
  const ids = Array.from({ length: 256 }, (_, i) => (i * 104729) % 151000);
  return JSON.stringify({
    id: "chatcmpl-bench", object: "chat.completion", created: 1_750_000_000, model: "Qwen/Qwen3-8B",
    choices: [{
      index: 0, finish_reason: "stop", stop_reason: null, token_ids: ids,
      message: { role: "assistant", content: "word ".repeat(200), reasoning: null, tool_calls: [] },
      logprobs: { content: ids.map((id, i) => ({ token: `t${id}`, logprob: -0.001 * i, bytes: null, top_logprobs: [] })) },
    }],
    usage: { prompt_tokens: prompt.length, completion_tokens: ids.length, total_tokens: prompt.length + ids.length },
    prompt_token_ids: prompt, prompt_logprobs: null, kv_transfer_params: null,
  });
}

async function serveUpstream(): Promise<void> {
  const answer = Buffer.from(cannedAnswer());
  const len = String(answer.length);
  const server = createServer((req, res) => {
    req.on("data", () => {});
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json", "content-length": len });
      res.end(answer);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, "127.0.0.1", () => process.send!({ url: `http://127.0.0.1:${(server.address() as { port: number }).port}` }));
}

async function serveProxy(upstream: string): Promise<void> {
  const { startProxy } = await import("../src/proxy/index.ts");
  const { silentLogger } = await import("../src/util/log.ts");
  const session = { sessionId: "bench", taskId: "bench", attempt: 1, metadata: {}, active: true };
  let stored = 0;
  const proxy = await startProxy(
    { sessions: { lookup: (c) => (c === "bench-key" ? session : undefined) }, sink: { record: async () => void stored++ }, log: silentLogger() },
    { host: "127.0.0.1", port: 0, upstreams: [upstream], flavor: "vllm", modelServed: "Qwen/Qwen3-8B", maxBodyBytes: 32 << 20, upstreamTimeoutMs: 60_000 },
  );
  process.on("message", (m: { stats?: boolean; exit?: boolean }) => {
    if (m.stats) process.send!({ stats: proxy.stats(), stored, cpu: process.cpuUsage() });
    if (m.exit) void proxy.stop().then(() => process.exit(0));
  });
  process.send!({ url: proxy.url });
}

if (ROLE === "upstream") await serveUpstream();
if (ROLE === "proxy") await serveProxy(process.env.POLAR_PROXY_BENCH_UPSTREAM!);

// ---------------------------------------------------------------- load generator

function startChild(role: string, env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string }> {
  const extra = role === "proxy" ? (process.env.POLAR_PROXY_BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean) : [];
  const execArgv = [...process.execArgv, ...extra];
  const child = fork(SELF, [], { execArgv, env: { ...process.env, POLAR_PROXY_BENCH_ROLE: role, ...env }, stdio: ["ignore", "inherit", "inherit", "ipc"] });
  return new Promise((resolve, reject) => {
    child.once("message", (m: { url: string }) => resolve({ child, url: m.url }));
    child.once("exit", (code) => reject(new Error(`${role} exited with ${code}`)));
  });
}

/** A chat request of about 20 KB, shaped like an agent's (system prompt, tools, a tool round). */
function requestBody(): string {
  const para = "The agent reads files, runs commands and edits code carefully, checking each result before going on. ";
  const tools = Array.from({ length: 12 }, (_, i) => ({
    type: "function",
    function: { name: `tool_${i}`, description: para.repeat(2), parameters: { type: "object", properties: { path: { type: "string", description: "a path" }, text: { type: "string" } }, required: ["path"] } },
  }));
  const body = {
    model: "agent-model", max_tokens: 1024,
    messages: [
      { role: "system", content: para.repeat(95) },
      { role: "user", content: "Please fix the failing test in the repository." },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "tool_0", arguments: "{\"path\":\"src/a.ts\"}" } }] },
      { role: "tool", tool_call_id: "call_1", content: para.repeat(55) },
    ],
    tools,
  };
  return JSON.stringify(body);
}

interface Run {
  latencies: number[];
  seconds: number;
}

async function drive(pool: Pool, path: string, body: Buffer, headers: Record<string, string>, total: number, concurrency: number): Promise<Run> {
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  const worker = async (): Promise<void> => {
    while (next < total) {
      next++;
      const s = performance.now();
      const res = await pool.request({ path, method: "POST", headers, body });
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${(await res.body.text()).slice(0, 200)}`);
      for await (const _ of res.body); // drain without decoding: the client's own cost is not what is measured
      latencies.push(performance.now() - s);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { latencies, seconds: (performance.now() - t0) / 1000 };
}

interface ProxyStatsMsg {
  stats: { captured: number; errors: number };
  stored: number;
  cpu: NodeJS.CpuUsage;
}

function proxyStats(child: ChildProcess): Promise<ProxyStatsMsg> {
  child.send({ stats: true });
  return new Promise((resolve) => child.once("message", (m) => resolve(m as ProxyStatsMsg)));
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

const f = (x: number, d = 3): string => x.toFixed(d);

export async function run(): Promise<void> {
  const up = await startChild("upstream");
  const px = await startChild("proxy", { POLAR_PROXY_BENCH_UPSTREAM: up.url });
  const body = Buffer.from(requestBody());
  const headers = { "content-type": "application/json", authorization: "Bearer bench-key" };
  const direct = new Pool(up.url, { connections: 64 });
  const proxied = new Pool(px.url, { connections: 64 });
  try {
    console.log(`request ${body.length} bytes; upstream answer ${Buffer.byteLength(cannedAnswer())} bytes`);
    const both = async (n: number, c: number) => ({
      d: await drive(direct, "/v1/chat/completions", body, headers, n, c),
      p: await drive(proxied, "/v1/chat/completions", body, headers, n, c),
    });
    await both(500, 8); // warm-up: JIT, keep-alive connections
    for (const c of [1, 64]) {
      const rounds = 5;
      const n = c === 1 ? 400 : 2000;
      const d: number[] = [];
      const p: number[] = [];
      let ds = 0;
      let ps = 0;
      let cpu = 0;
      for (let r = 0; r < rounds; r++) {
        const dr = await drive(direct, "/v1/chat/completions", body, headers, n, c);
        const before = await proxyStats(px.child);
        const pr = await drive(proxied, "/v1/chat/completions", body, headers, n, c);
        const after = await proxyStats(px.child);
        cpu += after.cpu.user + after.cpu.system - before.cpu.user - before.cpu.system;
        d.push(...dr.latencies);
        p.push(...pr.latencies);
        ds += dr.seconds;
        ps += pr.seconds;
      }
      const dm = pct(d, 50), pm = pct(p, 50), d99 = pct(d, 99), p99 = pct(p, 99);
      console.log(
        `concurrency ${c}: direct median ${f(dm)} ms p99 ${f(d99)} ms | proxied median ${f(pm)} ms p99 ${f(p99)} ms | ` +
          `added median ${f(pm - dm)} ms p99 ${f(p99 - d99)} ms | calls/s direct ${f(d.length / ds, 0)} proxied (captured) ${f(p.length / ps, 0)} | ` +
          `proxy CPU ${f(cpu / p.length, 0)} µs per call`,
      );
    }
    const stats = await proxyStats(px.child);
    console.log(`proxy captured ${stats.stats.captured} calls, stored ${stats.stored}, errors ${stats.stats.errors}`);
  } finally {
    await direct.close();
    await proxied.close();
    px.child.send({ exit: true });
    up.child.kill();
  }
}
