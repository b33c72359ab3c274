/**
 * The staging claim: with an expensive INIT (prepare `sleep 2`) and RUN
 * workers matched to the engine's slots, a staged gateway (INIT workers of
 * its own, a READY queue before RUN) keeps the engine busy, while a gateway
 * whose INIT and RUN share one pool (`gateway.shared_init_run`) leaves the
 * engine idle while its workers prepare. Busy fraction = the sim's
 * busy slot-seconds (`polar_sim_busy_slot_seconds_total`) over slots x time,
 * over the span from the task's first model call to the end of its last, and
 * over the middle 80% of that span (steady state).
 */
import type { Cluster } from "./cluster.ts";
import { startCluster } from "./cluster.ts";
import { fmt, runBatch } from "./measure.ts";
import { load } from "./proc.ts";
import { CALL_LOOP, counts, poll, submit, type TaskShape } from "./tasks.ts";

const SLOTS = 8;
const CALL_MS = 1500;
const CALLS = 1;

interface Point {
  at: number;
  busy: number;
  requests: number;
  running: number;
}

async function simPoint(simUrl: string): Promise<Point> {
  const r = await fetch(`${simUrl}/metrics?format=json`);
  const m = (await r.json()) as { busySlotSecondsTotal: number; requestsTotal: number; running: number; waiting: number };
  return { at: performance.now(), busy: m.busySlotSecondsTotal, requests: m.requestsTotal, running: m.running + m.waiting };
}

/**
 * Busy fraction while the engine had work: from the first model call of the
 * task to the end of its last one (sampled every 200 ms), and over the middle
 * 80% of that span (steady state, without the first INIT wave's ramp and the
 * last RUN wave's tail).
 */
async function measure(c: Cluster, label: string, shape: TaskShape): Promise<{ steady: number; whole: number; seconds: number; counts: string; load: string }> {
  const base = await simPoint(c.sim.url);
  const t0 = performance.now();
  const id = await submit(c.nc, `${label}-${process.pid}`, shape);
  const points: Point[] = [];
  for (;;) {
    const [st, p] = await Promise.all([poll(c.nc, id), simPoint(c.sim.url)]);
    points.push(p);
    if (st.status === "completed" || st.status === "failed") {
      const active = points.filter((x) => x.requests > base.requests);
      const first = active[0];
      const last = active.find((x) => x.requests === p.requests && x.running === 0) ?? p;
      const frac = (a: Point, b: Point) => (b.busy - a.busy) / (((b.at - a.at) / 1000) * SLOTS);
      const span = last.at - first.at;
      const near = (t: number) => active.reduce((best, x) => (Math.abs(x.at - t) < Math.abs(best.at - t) ? x : best));
      const steady = frac(near(first.at + 0.1 * span), near(first.at + 0.9 * span));
      return { steady, whole: frac(first, last), seconds: (performance.now() - t0) / 1000, counts: counts([st]), load: load() };
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

export async function staging(n: number): Promise<void> {
  const shape: TaskShape = { command: CALL_LOOP, env: { CALLS: String(CALLS), THINK: "0" }, prepare: "sleep 2", num_samples: n };
  const run = { max_run_workers: SLOTS, ready_capacity: SLOTS, max_postrun_workers: SLOTS };
  console.log(
    `\n[staging] ${n} sessions: INIT = prepare \`sleep 2\`, RUN = ${CALLS} model call(s) of ${CALL_MS} ms each; sim with ${SLOTS} slots, ${SLOTS} RUN workers; staged (16 INIT workers + READY queue) vs INIT and RUN sharing the ${SLOTS} workers`,
  );
  const c = await startCluster({ sim: ["--slots", String(SLOTS), "--ttft-ms", String(CALL_MS)], gateway: { ...run, max_init_workers: 16 }, gateways: 1 });
  try {
    const rows: Array<[string, Awaited<ReturnType<typeof measure>>]> = [];
    await runBatch(c, "warm-staged", { ...shape, num_samples: 4 });
    rows.push(["staged", await measure(c, "staged", shape)]);
    await c.gateways[0].stop();
    await c.addGateway({ ...run, shared_init_run: true });
    await runBatch(c, "warm-shared", { ...shape, num_samples: 4 });
    rows.push(["shared pool", await measure(c, "shared", shape)]);
    for (const [name, m] of rows) {
      console.log(`  ${name.padEnd(11)}: upstream busy ${fmt(m.steady * 100)}% steady (middle 80% of the span with model calls), ${fmt(m.whole * 100)}% over the whole span; ${fmt(m.seconds)} s for ${n} sessions (${m.counts}); ${m.load}`);
    }
    const [s, u] = [rows[0][1], rows[1][1]];
    console.log(`  staged / shared: ${fmt(s.steady / u.steady, 2)}x the busy fraction, ${fmt(u.seconds / s.seconds, 2)}x the throughput (goal: staged >= 85% where shared < 50%)`);
  } finally {
    await c.stop();
  }
}
