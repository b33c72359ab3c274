/**
 * Pause benchmark: a capturing proxy with 256 upstream calls in flight (the
 * upstream answers each after a fixed 200 ms), then `pause`: how long until
 * the gate has drained them (drain time minus the upstream's remaining work
 * is the overhead); then 256 more calls arrive and are held, and `resume`:
 * how long until every held call has reached the upstream. Rounds repeat and
 * medians are printed. The proxy, gate and upstream are real (HTTP on
 * localhost, in this process); NATS fan-out is not included.
 */
import { createServer } from "node:http";
import { Pool } from "undici";
import { InferenceGate } from "../src/proxy/gate.ts";
import { startProxy } from "../src/proxy/server.ts";
import type { CaptureSink, ProxySession, SessionDirectory } from "../src/proxy/types.ts";
import { silentLogger } from "../src/util/log.ts";

const CALLS = 256;
const ROUNDS = 5;

function answer(): string {
  return JSON.stringify({
    id: "c", object: "chat.completion", created: 1, model: "m",
    choices: [{ index: 0, finish_reason: "stop", token_ids: [1, 151645], message: { role: "assistant", content: "ok" },
      logprobs: { content: [{ token: "ok", logprob: -0.1 }, { token: "<|im_end|>", logprob: -0.01 }] } }],
    usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }, prompt_token_ids: [1, 2, 3],
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function run(): Promise<void> {
  const arrivals: number[] = [];
  const body = answer();
  // The engine holds every answer until told to finish (`hold`), or answers at once.
  let hold = true;
  const waiting: Array<() => void> = [];
  const upstream = createServer((req, res) => {
    arrivals.push(performance.now());
    req.resume();
    req.on("end", () => {
      const send = () => res.writeHead(200, { "content-type": "application/json" }).end(body);
      if (hold) waiting.push(send);
      else send();
    });
  });
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", () => r()));
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
  const session: ProxySession = { sessionId: "bench", taskId: "bench", attempt: 1, metadata: {}, active: true };
  const sessions: SessionDirectory = { lookup: () => session };
  const sink: CaptureSink = { record: async () => {} };
  const gate = new InferenceGate();
  const proxy = await startProxy(
    { sessions, sink, log: silentLogger(), gate },
    { host: "127.0.0.1", port: 0, upstreams: [upstreamUrl], flavor: "vllm", modelServed: "m", maxBodyBytes: 1 << 20, upstreamTimeoutMs: 60_000 },
  );
  const client = new Pool(proxy.url, { connections: CALLS * 2 });
  const req = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });
  const call = () =>
    client.request({ path: "/v1/chat/completions", method: "POST", headers: { "content-type": "application/json", authorization: "Bearer k" }, body: req })
      .then(async (r) => {
        await r.body.text();
        if (r.statusCode !== 200) throw new Error(`HTTP ${r.statusCode}`);
      });
  const until = async (cond: () => boolean) => {
    while (!cond()) await new Promise((r) => setImmediate(r));
  };

  const drain: number[] = [];
  const release: number[] = [];
  const releaseAll: number[] = [];
  let version = 0;
  for (let round = 0; round < ROUNDS; round++) {
    arrivals.length = 0;
    const first = Array.from({ length: CALLS }, call);
    await until(() => arrivals.length === CALLS);
    await until(() => waiting.length === CALLS);
    const t0 = performance.now();
    const pausing = gate.pause(30_000);
    // The engine finishes all 256 at once, right after the pause began.
    for (const send of waiting.splice(0)) send();
    const report = await pausing;
    const t1 = performance.now();
    if (report.drained !== CALLS || report.inflight !== 0) throw new Error(`drained ${report.drained} of ${CALLS}`);
    drain.push(t1 - t0);
    await Promise.all(first);
    arrivals.length = 0;
    hold = false;
    const second = Array.from({ length: CALLS }, call);
    await until(() => gate.held === CALLS);
    const r0 = performance.now();
    const rel = gate.resume(++version);
    if (rel.released !== CALLS) throw new Error(`released ${rel.released}`);
    const r1 = performance.now();
    await until(() => arrivals.length === CALLS);
    release.push(r1 - r0);
    releaseAll.push(Math.max(...arrivals) - r0);
    await Promise.all(second);
    hold = true;
  }
  process.stdout.write(
    `pause with ${CALLS} upstream calls in flight, ${ROUNDS} rounds, medians:\n` +
      `  drain: ${median(drain).toFixed(1)} ms from pause until all ${CALLS} in-flight calls were answered, captured and counted (the engine finishes them all at once)\n` +
      `  resume: ${median(release).toFixed(2)} ms to release ${CALLS} held calls at the gate; ${median(releaseAll).toFixed(1)} ms until all ${CALLS} reached the upstream\n`,
  );
  await client.close();
  await proxy.stop();
  await new Promise<void>((r) => upstream.close(() => r()));
}
