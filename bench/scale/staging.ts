/**
 * The staging claim: with an expensive INIT (prepare `sleep 2`) and RUN
 * workers matched to the engine's slots, a staged gateway (INIT workers of
 * its own, a READY queue before RUN) keeps the engine busy, while a gateway
 * whose INIT and RUN share one pool (`gateway.shared_init_run`) leaves the
 * engine idle while its workers prepare. Busy fraction = the sim's
 * busy slot-seconds (`polar_sim_busy_slot_seconds_total`) over slots x time,
 * in the steady window between 10% and 90% of the sessions finished, and
 * over the whole run for reference.
 */
import type { Cluster } from "./cluster.ts";
import { startCluster } from "./cluster.ts";
import { fmt, runBatch } from "./measure.ts";
import { load } from "./proc.ts";
import { CALL_LOOP, counts, poll, submit, type TaskShape } from "./tasks.ts";

const SLOTS = 8;
const CALL_MS = 400;
const CALLS = 4;

interface Point {
  at: number;
  busy: number;
  finished: number;
}

async function busySeconds(simUrl: string): Promise<number> {
  const r = await fetch(`${simUrl}/metrics?format=json`);
  return ((await r.json()) as { busySlotSecondsTotal: number }).busySlotSecondsTotal;
}

async function measure(c: Cluster, label: string, shape: TaskShape): Promise<{ steady: number; whole: number; seconds: number; counts: string; load: string }> {
  const points: Point[] = [{ at: performance.now(), busy: await busySeconds(c.sim.url), finished: 0 }];
  const id = await submit(c.nc, `${label}-${process.pid}`, shape);
  for (;;) {
    const st = await poll(c.nc, id);
    points.push({ at: performance.now(), busy: await busySeconds(c.sim.url), finished: st.completed_sessions });
    if (st.status === "completed" || st.status === "failed") {
      const frac = (a: Point, b: Point) => (b.busy - a.busy) / (((b.at - a.at) / 1000) * SLOTS);
      const from = points.find((p) => p.finished >= 0.1 * shape.num_samples)!;
      const to = points.find((p) => p.finished >= 0.9 * shape.num_samples)!;
      const first = points[0];
      const last = points[points.length - 1];
      return { steady: frac(from, to), whole: frac(first, last), seconds: (last.at - first.at) / 1000, counts: counts([st]), load: load() };
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

export async function staging(n: number): Promise<void> {
  const shape: TaskShape = { command: CALL_LOOP, env: { CALLS: String(CALLS), THINK: "0" }, prepare: "sleep 2", num_samples: n };
  const run = { max_run_workers: SLOTS, ready_capacity: SLOTS, max_postrun_workers: SLOTS };
  console.log(
    `\n[staging] ${n} sessions: INIT = prepare \`sleep 2\`, RUN = ${CALLS} model calls of ${CALL_MS} ms; sim with ${SLOTS} slots, ${SLOTS} RUN workers; staged (16 INIT workers + READY queue) vs INIT and RUN sharing the ${SLOTS} workers`,
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
      console.log(`  ${name.padEnd(11)}: upstream busy ${fmt(m.steady * 100)}% steady (10%-90% of sessions finished), ${fmt(m.whole * 100)}% over the whole run; ${fmt(m.seconds)} s for ${n} sessions (${m.counts}); ${m.load}`);
    }
    const [s, u] = [rows[0][1], rows[1][1]];
    console.log(`  staged / shared: ${fmt(s.steady / u.steady, 2)}x the busy fraction, ${fmt(u.seconds / s.seconds, 2)}x the throughput (goal: staged >= 85% where shared < 50%)`);
  } finally {
    await c.stop();
  }
}
