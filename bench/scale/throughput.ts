/**
 * Throughput parts of the scale benchmark: the framework's cost per session
 * (`true` as the agent, beside one captured model call), gateway RSS after
 * 10x the sessions, and sessions/s with 1, 2 and 4 gateway processes.
 */
import { startCluster } from "./cluster.ts";
import { fmt, runBatch, settledRss, type Batch } from "./measure.ts";
import { load } from "./proc.ts";
import { CALL_LOOP, type TaskShape } from "./tasks.ts";

const WORKERS = { max_init_workers: 16, max_run_workers: 16, max_postrun_workers: 16 };
const NOTHING: Omit<TaskShape, "num_samples"> = { command: "true" };
const ONE_CALL: Omit<TaskShape, "num_samples"> = { command: CALL_LOOP, env: { CALLS: "1", THINK: "0" } };

function cpuLine(b: Batch): string {
  const per = (s: number) => fmt((s * 1000) / b.sessions, 2);
  const framework = Object.entries(b.cpu).filter(([k]) => k !== "sim").reduce((n, [, v]) => n + v, 0);
  return `CPU ms/session: ${Object.entries(b.cpu).map(([k, v]) => `${k} ${per(v)}`).join(", ")}; framework total (gateways + supervisor + nats-server) ${per(framework)}`;
}

export async function overhead(n: number): Promise<void> {
  console.log(`\n[overhead] ${n} sessions whose agent is \`true\` vs ${n} with one captured model call; one gateway, ${WORKERS.max_run_workers} workers per stage`);
  const c = await startCluster({ sim: [], gateway: WORKERS, gateways: 1 });
  try {
    await runBatch(c, "warm", { ...NOTHING, num_samples: 16 });
    const a = await runBatch(c, "nothing", { ...NOTHING, num_samples: n });
    const b = await runBatch(c, "one-call", { ...ONE_CALL, num_samples: n });
    console.log(`  \`true\`:         ${fmt(a.perSecond)} sessions/s = ${fmt(1000 / a.perSecond)} ms/session wall (${a.counts}: no model call, so no trajectory, as designed); ${cpuLine(a)}`);
    console.log(`  one model call: ${fmt(b.perSecond)} sessions/s = ${fmt(1000 / b.perSecond)} ms/session wall (${b.counts}); ${cpuLine(b)}`);
    console.log(`  ratio one call / \`true\`: ${fmt(a.perSecond / b.perSecond, 2)}x the wall time per session; ${load()}`);
  } finally {
    await c.stop();
  }
}

export async function rssGrowth(big: number): Promise<void> {
  const first = Math.max(1, Math.round(big / 10));
  console.log(`\n[rss] gateway RSS after ${first} vs after ${big} sessions (one captured model call each; one gateway, ${WORKERS.max_run_workers} workers per stage)`);
  const c = await startCluster({ sim: [], gateway: WORKERS, gateways: 1 });
  const gw = c.gateways[0];
  try {
    await runBatch(c, "warm", { ...ONE_CALL, num_samples: 16 });
    const r0 = await settledRss(gw);
    const a = await runBatch(c, "rss-first", { ...ONE_CALL, num_samples: first });
    const r1 = await settledRss(gw);
    const rest = big - first;
    const perTask = Math.min(1000, rest);
    const b = await runBatch(c, "rss-rest", { ...ONE_CALL, num_samples: perTask }, Math.ceil(rest / perTask));
    const r2 = await settledRss(gw);
    console.log(`  gateway RSS (median over 3 s idle): after warm-up ${fmt(r0)} MB, after ${first} sessions ${fmt(r1)} MB, after ${first + b.sessions} sessions ${fmt(r2)} MB`);
    console.log(`  ratio after ${first + b.sessions} / after ${first}: ${fmt(r2 / r1, 3)} (${fmt((r2 / r1 - 1) * 100)}%; goal within 10%)`);
    console.log(`  throughput: ${fmt(a.perSecond)} sessions/s (first ${first}, ${a.counts}), ${fmt(b.perSecond)} sessions/s (next ${b.sessions}, ${b.counts}); ${load()}`);
  } finally {
    await c.stop();
  }
}

export async function gateways(n: number): Promise<void> {
  const gw = { max_init_workers: 8, max_run_workers: 8, max_postrun_workers: 8 };
  const shape: TaskShape = { command: CALL_LOOP, env: { CALLS: "1", THINK: "0.5" }, num_samples: n };
  console.log(`\n[gateways] ${n} sessions (0.5 s think + one model call) with 1, 2 and 4 gateway processes, ${gw.max_run_workers} RUN workers each; same supervisor, nats-server and sim`);
  const c = await startCluster({ sim: [], gateway: gw, gateways: 1 });
  try {
    const rows: Array<[number, Batch, string]> = [];
    for (const want of [1, 2, 4]) {
      while (c.gateways.length < want) await c.addGateway();
      await runBatch(c, "warm", { ...shape, num_samples: 4 * want });
      rows.push([want, await runBatch(c, `gw${want}`, shape), load()]);
    }
    const base = rows[0][1].perSecond;
    for (const [k, b, l] of rows) {
      const gwCpu = Object.entries(b.cpu).filter(([name]) => name.startsWith("gateway")).reduce((s, [, v]) => s + v, 0);
      console.log(
        `  ${k} gateway${k > 1 ? "s" : " "}: ${fmt(b.perSecond)} sessions/s (${fmt(b.perSecond / base, 2)}x one gateway; ${b.counts}); CPU ms/session gateways ${fmt((gwCpu * 1000) / b.sessions, 2)}, supervisor ${fmt((b.cpu.supervisor * 1000) / b.sessions, 2)}, nats-server ${fmt((b.cpu["nats-server"] * 1000) / b.sessions, 2)}; ${l}`,
      );
    }
  } finally {
    await c.stop();
  }
}
