/**
 * Sim throughput and load-model accuracy, measured side by side in one run:
 * zero-delay request rate for non-streaming vs streaming chat (script policy,
 * a pi-sized prompt with tools), random-policy token rate, and the /metrics
 * busy fraction against the busy time clients observed.
 */
import { startSim, type SimHandle } from "../src/sim/server.ts";

const SYSTEM = "You are an expert coding assistant. ".repeat(60);
const tools = ["read", "bash", "edit", "write"].map((name) => ({
  type: "function",
  function: { name, description: `The ${name} tool.`, parameters: { type: "object", properties: { command: { type: "string" }, path: { type: "string" } } } },
}));
const chatBody = (stream: boolean) => ({
  model: "m",
  messages: [{ role: "system", content: SYSTEM }, { role: "user", content: "Run the shell command `ls -la` and reply with done." }],
  tools,
  stream,
  return_token_ids: true,
  logprobs: true,
});

async function timedCalls(sim: SimHandle, body: unknown, concurrency: number, total: number): Promise<number[]> {
  const lat: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next++ < total) {
      const t = performance.now();
      const r = await fetch(`${sim.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      await r.text();
      lat.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return lat.sort((a, b) => a - b);
}

const q = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))];

export async function run(): Promise<void> {
  const sim = await startSim({});
  try {
    await timedCalls(sim, chatBody(false), 4, 300); // warm-up (JIT)
    for (const stream of [false, true, false, true]) {
      const t0 = performance.now();
      const lat = await timedCalls(sim, chatBody(stream), 8, 400);
      const secs = (performance.now() - t0) / 1000;
      console.log(`chat ${stream ? "stream    " : "non-stream"}: ${(400 / secs).toFixed(0)} req/s at concurrency 8, latency median ${q(lat, 0.5).toFixed(1)} ms, p99 ${q(lat, 0.99).toFixed(1)} ms`);
    }
    const randomBody = { model: "m", messages: [{ role: "user", content: "go" }], max_tokens: 512, ignore_eos: true, policy: "random" };
    const t0 = performance.now();
    await timedCalls(sim, randomBody, 8, 200);
    console.log(`random policy: ${((200 * 512) / ((performance.now() - t0) / 1000)).toFixed(0)} generated tokens/s (512-token answers, zero delay)`);
  } finally {
    await sim.stop();
  }

  const slots = 8;
  for (const clients of [2, 4, 6, 8, 16]) {
    const s = await startSim({ slots, ttftMs: 10, perTokenMs: 2, metricsWindowMs: 1000 });
    try {
      const spans: Array<[number, number | undefined]> = [];
      const stopAt = performance.now() + 1500;
      const body = { model: "m", messages: [{ role: "user", content: "x" }], max_tokens: 40, ignore_eos: true, policy: "random" };
      let reading: { busy: number; at: number; window: number } | undefined;
      const probe = setTimeout(() => {
        const m = s.metrics();
        reading = { busy: m.busyFraction, at: performance.now(), window: m.windowSeconds * 1000 };
      }, 1300);
      await Promise.all(
        Array.from({ length: clients }, async () => {
          while (performance.now() < stopAt) {
            const span: [number, number | undefined] = [performance.now(), undefined];
            spans.push(span);
            await (await fetch(`${s.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })).text();
            span[1] = performance.now();
          }
        }),
      );
      clearTimeout(probe);
      const r = reading!;
      const from = r.at - r.window;
      const observed = Math.min(1, spans.reduce((a, [st, en]) => a + Math.max(0, Math.min(en ?? r.at, r.at) - Math.max(st, from)), 0) / (r.window * slots));
      console.log(`busy fraction, ${clients} clients on ${slots} slots: /metrics ${r.busy.toFixed(3)}, clients observed ${observed.toFixed(3)}, ideal ${Math.min(1, clients / slots).toFixed(3)}`);
    } finally {
      await s.stop();
    }
  }
}
