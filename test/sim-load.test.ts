/**
 * The load model: a fixed number of slots with a queue. Closed-loop clients
 * drive the sim; the test checks that no more than `slots` requests ever
 * generate at once, that queued requests wait their turn, and that the
 * /metrics busy fraction matches the busy time the clients observed (within
 * 5 percentage points).
 */
import { afterEach, describe, expect, it } from "vitest";
import { startSim, type SimHandle, type SimMetrics } from "../src/sim/server.ts";

const SLOTS = 4;
const TOKENS = 20;
const TTFT = 20;
const PER_TOKEN = 5;
const HOLD = TTFT + (TOKENS - 1) * PER_TOKEN; // ms a request holds its slot

let sim: SimHandle | undefined;
afterEach(async () => {
  await sim?.stop();
  sim = undefined;
});

interface Span {
  start: number;
  end?: number;
}

/**
 * `clients` closed-loop clients stream requests until `ms` have passed. Each
 * request's slot span is read off the stream itself: from its first token
 * minus the time to first token, to its last token. HTTP and client overhead
 * fall outside the span, as they fall outside the slot.
 */
async function drive(s: SimHandle, clients: number, ms: number, probe: (m: SimMetrics, at: number) => void): Promise<Span[]> {
  const spans: Span[] = [];
  const stopAt = performance.now() + ms;
  const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "load" }], max_tokens: TOKENS, ignore_eos: true, policy: "random", stream: true, return_token_ids: true });
  const client = async () => {
    while (performance.now() < stopAt) {
      const sent = performance.now();
      const span: Span = { start: sent + TTFT }; // provisional until the first token arrives
      spans.push(span);
      const r = await fetch(`${s.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
      expect(r.status).toBe(200);
      let tokens = 0;
      const decoder = new TextDecoder();
      for await (const part of r.body as AsyncIterable<Uint8Array>) {
        const n = (decoder.decode(part, { stream: true }).match(/"token_ids":\[\d+\]/g) ?? []).length;
        if (n && tokens === 0) span.start = performance.now() - TTFT;
        tokens += n;
        if (tokens === TOKENS) span.end = performance.now();
      }
      expect(tokens).toBe(TOKENS);
    }
  };
  const poll = setInterval(() => probe(s.metrics(), performance.now()), 10);
  try {
    await Promise.all(Array.from({ length: clients }, client));
  } finally {
    clearInterval(poll);
  }
  return spans;
}

/** Slot-busy fraction the clients saw in [from, to], from the slot spans they observed. */
function observedBusy(spans: Span[], from: number, to: number, slots: number): number {
  let busy = 0;
  for (const s of spans) busy += Math.max(0, Math.min(s.end ?? to, to) - Math.max(Math.min(s.start, to), from));
  return Math.min(busy / ((to - from) * slots), 1);
}

describe("sim load model", () => {
  it("holds the slot limit, queues the rest, and reports a saturated busy fraction", async () => {
    sim = await startSim({ slots: SLOTS, ttftMs: TTFT, perTokenMs: PER_TOKEN, metricsWindowMs: 1000 });
    let peak = 0;
    let peakWaiting = 0;
    const t0 = performance.now();
    let sample: { m: SimMetrics; at: number } | undefined;
    const spans = await drive(sim, 3 * SLOTS, 1600, (m, at) => {
      peak = Math.max(peak, m.running);
      peakWaiting = Math.max(peakWaiting, m.waiting);
      if (!sample && at - t0 > 1300) sample = { m, at };
    });
    const elapsed = performance.now() - t0;
    expect(peak).toBe(SLOTS);
    expect(sim.metrics().maxRunning).toBe(SLOTS);
    expect(peakWaiting).toBeGreaterThanOrEqual(2 * SLOTS - 1);
    // Throughput is bounded by the slots: at most SLOTS requests per HOLD.
    const done = spans.filter((s) => s.end !== undefined).length;
    expect(done).toBeLessThanOrEqual(Math.ceil((elapsed / HOLD) * SLOTS) + SLOTS);
    expect(done).toBeGreaterThan((1600 / HOLD) * SLOTS * 0.5); // loose: a loaded machine only slows it
    expect(sample).toBeDefined();
    expect(sample!.m.busyFraction).toBeGreaterThan(0.95);
    expect(sample!.m.busyFraction).toBeLessThanOrEqual(1.0001);
    const expectedRate = (SLOTS * TOKENS * 1000) / HOLD;
    expect(sample!.m.tokensPerSecond).toBeGreaterThan(expectedRate * 0.6);
    expect(sample!.m.tokensPerSecond).toBeLessThan(expectedRate * 1.1);
  });

  it("reports a partial busy fraction that matches what the clients observed within 5%", async () => {
    sim = await startSim({ slots: SLOTS, ttftMs: TTFT, perTokenMs: PER_TOKEN, metricsWindowMs: 1000 });
    const samples: Array<{ m: SimMetrics; at: number }> = [];
    const t0 = performance.now();
    const spans = await drive(sim, 2, 1800, (m, at) => {
      if (at - t0 > 1200 && samples.length < 3 && at - (samples.at(-1)?.at ?? 0) > 150) samples.push({ m, at });
    });
    expect(samples.length).toBe(3);
    for (const { m, at } of samples) {
      const observed = observedBusy(spans, at - m.windowSeconds * 1000, at, SLOTS);
      expect(observed).toBeGreaterThan(0.3);
      expect(observed).toBeLessThanOrEqual(0.52);
      expect(Math.abs(m.busyFraction - observed)).toBeLessThan(0.05);
      expect(m.running).toBeLessThanOrEqual(2);
      expect(m.waiting).toBe(0);
    }
  });

  it("paces streamed tokens: time to first token with prefill, then the per-token delay stretched by the batch", async () => {
    sim = await startSim({ ttftMs: 100, perTokenMs: 20, prefillMsPerToken: 1, batchSlowdown: 0.5 });
    const body = { model: "m", messages: [{ role: "user", content: "pace" }], max_tokens: 10, ignore_eos: true, policy: "random", stream: true, return_token_ids: true };
    const prompt = 9; // <|im_start|>user\npace<|im_end|>\n<|im_start|>assistant\n
    const timed = async () => {
      const t0 = performance.now();
      const r = await fetch(`${sim!.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      const times: number[] = [];
      const decoder = new TextDecoder();
      for await (const part of r.body as AsyncIterable<Uint8Array>) {
        const n = (decoder.decode(part).match(/"token_ids":\[\d+\]/g) ?? []).length;
        for (let i = 0; i < n; i++) times.push(performance.now() - t0);
      }
      return times;
    };
    const alone = await timed();
    expect(alone).toHaveLength(10);
    expect(alone[0]).toBeGreaterThanOrEqual(100 + prompt - 2);
    expect(alone[0]).toBeLessThan(100 + prompt + 250); // generous: a loaded CI machine only adds delay
    expect(alone[9] - alone[0]).toBeGreaterThanOrEqual(9 * 20 - 25); // a late first receipt shortens this a little
    expect(alone[9] - alone[0]).toBeLessThan(9 * 20 + 250);
    // Two at once: each decodes at 1.5x the per-token delay.
    const [a, b] = await Promise.all([timed(), timed()]);
    for (const t of [a, b]) expect(t[9] - t[0]).toBeGreaterThanOrEqual(9 * 30 - 40); // unbatched would be 9 * 20
  });

  it("exposes the figures as Prometheus text", async () => {
    sim = await startSim({ slots: 3 });
    await fetch(`${sim.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }) });
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    expect(text).toMatch(/^polar_sim_slots\{model_name="Qwen\/Qwen3-8B"\} 3$/m);
    expect(text).toMatch(/^polar_sim_busy_fraction\{model_name="Qwen\/Qwen3-8B"\} [0-9.e-]+$/m);
    expect(text).toMatch(/^vllm:num_requests_waiting\{model_name="Qwen\/Qwen3-8B"\} 0$/m);
    expect(text).toMatch(/^vllm:generation_tokens_total\{model_name="Qwen\/Qwen3-8B"\} [1-9]\d*$/m);
    const json = (await (await fetch(`${sim.url}/metrics?format=json`)).json()) as SimMetrics;
    expect(json.slots).toBe(3);
    expect(json.requestsTotal).toBe(1);
  });
});
