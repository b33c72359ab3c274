/**
 * What binding a credential to its sandbox costs: the latency of the first
 * request on a fresh connection (the only one that pays the check) for a
 * session bound by process tree over TCP, bound to its own Unix socket, and
 * not bound, interleaved on the same proxy. The client is a child process
 * (the session's process tree), opening a new connection for every call; the
 * upstream answers a small canned completion. Later requests on a kept-alive
 * connection reuse the verdict and cost nothing extra.
 */
import { fork, spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const SELF = fileURLToPath(import.meta.url);
const ROUNDS = Number(process.env.POLAR_BIND_BENCH_ROUNDS ?? 300);

const BODY = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hello" }], max_tokens: 8 });

/** The client (child): one request per fresh connection for each mode, interleaved; sends back the latencies. */
async function client(): Promise<void> {
  const http = await import("node:http");
  const { url, socket } = JSON.parse(process.env.POLAR_BIND_BENCH!) as { url: string; socket: string };
  const u = new URL(url);
  const once = (where: Record<string, unknown>, key: string): Promise<number> =>
    new Promise((resolve, reject) => {
      const t0 = performance.now();
      const agent = new http.Agent({ keepAlive: false });
      const req = http.request(
        { ...where, path: "/v1/chat/completions", method: "POST", agent, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" } },
        (res) => {
          res.resume();
          res.on("end", () => (res.statusCode === 200 ? resolve(performance.now() - t0) : reject(new Error(`HTTP ${res.statusCode}`))));
        },
      );
      req.on("error", reject);
      req.end(BODY);
    });
  const tcp = { host: u.hostname, port: Number(u.port) };
  const out = { unbound: [] as number[], tcp: [] as number[], walk: [] as number[], socket: [] as number[] };
  for (let i = 0; i < ROUNDS + 20; i++) {
    const u0 = await once(tcp, "key-unbound");
    const t0 = await once(tcp, "key-tcp");
    const w0 = i % 10 === 0 ? await once(tcp, "key-walk") : undefined;
    const s0 = await once({ socketPath: socket }, "key-socket");
    if (i < 20) continue; // warm-up
    out.unbound.push(u0);
    out.tcp.push(t0);
    if (w0 !== undefined) out.walk.push(w0);
    out.socket.push(s0);
  }
  process.send!(out);
}

if (process.env.POLAR_BIND_BENCH) await client();

function hostProcesses(): number {
  return readdirSync("/proc").filter((e) => /^\d+$/.test(e)).length;
}

/**
 * Finding a session's process tree on a host that runs many sessions: walking
 * down from the roots (child lists) against reading every process's PPid, side
 * by side, with OTHERS extra processes (bash + sleep pairs, like live shell
 * sessions) running.
 */
async function treeWalkVsScan(): Promise<void> {
  const { processTree, processTreeByScan } = await import("../src/proxy/peer-proc.ts");
  const others = Number(process.env.POLAR_BIND_BENCH_OTHERS ?? 2000);
  // The session measured: bash with two children.
  const session = spawn("bash", ["-c", "sleep 600 & sleep 600 & wait"], { stdio: "ignore", detached: true });
  const root = session.pid!;
  const kids = [session, ...Array.from({ length: others / 2 }, () => spawn("bash", ["-c", "sleep 600 & wait"], { stdio: "ignore", detached: true }))];
  try {
    for (const deadline = Date.now() + 60_000; (hostProcesses() < others || processTree([root]).size < 3) && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 200));
    const walk: number[] = [];
    const scan: number[] = [];
    for (let i = 0; i < 30; i++) {
      let t = performance.now();
      const a = processTree([root]);
      walk.push(performance.now() - t);
      t = performance.now();
      const b = processTreeByScan([root]);
      scan.push(performance.now() - t);
      if (a.size !== 3 || b.size !== 3) throw new Error(`the session's tree has 3 processes; the walk found ${a.size}, the scan ${b.size}`);
    }
    const [w, sc] = [median(walk), median(scan)];
    console.log(`finding a session's process tree with ${hostProcesses()} processes on the host (medians of 30, interleaved):`);
    console.log(`  walk down from the roots ${w.toFixed(3)} ms | scan every process ${sc.toFixed(3)} ms (${(sc / w).toFixed(0)}x)`);
  } finally {
    for (const k of kids) {
      try {
        process.kill(-k.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

export async function run(): Promise<void> {
  const { startProxy } = await import("../src/proxy/index.ts");
  const { silentLogger } = await import("../src/util/log.ts");
  const answer = JSON.stringify({
    id: "x", object: "chat.completion", created: 1, model: "m", prompt_token_ids: [1, 2, 3],
    choices: [{ index: 0, finish_reason: "stop", token_ids: [4, 5], message: { role: "assistant", content: "hi" }, logprobs: { content: [{ token: "h", logprob: -0.1 }, { token: "i", logprob: -0.2 }] } }],
    usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
  });
  const upstream = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end(answer));
  });
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  const dir = await mkdtemp(join(tmpdir(), "polar-bind-bench-"));
  const sessions = new Map(["unbound", "tcp", "walk", "socket"].map((m) => [`key-${m}`, { sessionId: m, taskId: "t", attempt: 1, metadata: {}, active: true }]));
  let clientPid = 0;
  const tcpBinding = { via: "tcp" as const, roots: () => [clientPid] };
  const proxy = await startProxy(
    {
      sessions: { lookup: (c) => sessions.get(c) },
      sink: { record: async () => {} },
      log: silentLogger(),
      // "tcp": one binding, as a gateway keeps it (its tree is remembered); "walk": a new one each time (every check walks /proc).
      peers: { bindingOf: ({ sessionId: id }) => (id === "tcp" ? tcpBinding : id === "walk" ? { via: "tcp", roots: () => [clientPid] } : id === "socket" ? { via: "socket" } : undefined) },
    },
    {
      host: "127.0.0.1", port: 0, upstreams: [`http://127.0.0.1:${(upstream.address() as { port: number }).port}`],
      flavor: "vllm", modelServed: "m", maxBodyBytes: 1 << 20, upstreamTimeoutMs: 10_000,
    },
  );
  const socket = join(dir, "s.sock");
  await proxy.openSessionSocket("socket", socket);
  try {
    const child = fork(SELF, [], { env: { ...process.env, POLAR_BIND_BENCH: JSON.stringify({ url: proxy.url, socket }) }, stdio: ["ignore", "inherit", "inherit", "ipc"] });
    clientPid = child.pid!;
    const r = await new Promise<Record<"unbound" | "tcp" | "walk" | "socket", number[]>>((resolve, reject) => {
      child.once("message", (m) => resolve(m as never));
      child.once("exit", (code) => reject(new Error(`client exited with ${code}`)));
    });
    const [u, t, w, s] = [median(r.unbound), median(r.tcp), median(r.walk), median(r.socket)];
    const f = (x: number) => x.toFixed(3);
    console.log(`first request on a fresh connection, ${ROUNDS} each (${r.walk.length} for the walk), interleaved (medians):`);
    console.log(`  unbound (TCP) ${f(u)} ms | bound to its socket (Unix) ${f(s)} ms`);
    console.log(`  bound by process tree (TCP), a process already seen in the tree: ${f(t)} ms, +${f(t - u)} ms`);
    console.log(`  bound by process tree (TCP), a process not seen yet (walks /proc): ${f(w)} ms, +${f(w - u)} ms`);
    console.log(`  processes on this host: ${hostProcesses()}`);
    await treeWalkVsScan();
  } finally {
    await proxy.stop();
    upstream.close();
    await rm(dir, { recursive: true, force: true });
  }
}
