/**
 * N concurrent sessions on one gateway process: each session is a bash loop
 * of model calls with think time that runs until the benchmark creates a stop
 * file. The loop is bash alone (no process started per call), on one
 * kept-alive connection or a new connection per call; `curl` starts curl and
 * sleep for each call instead (POLAR_BENCH_CLIENTS picks). Once all N are live (>= 98% of N both held in RUN by the gateway, as
 * its heartbeat reports, and with their harness process started) the gateway's RSS and CPU are sampled for a while; RSS per live
 * session is the rise over the idle gateway divided by the live sessions.
 *
 * Proxy added latency = what the client saw (its time for the call, printed by
 * the harness and carried in the result's stdout tail) minus the proxy's own
 * upstream round trip (`metadata.inference_timings.upstream_ms` of the
 * CompletionRecord with the same seq). It is everything the proxy adds:
 * accepting the connection, auth, tokenizing, forwarding, capture.
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SessionResult } from "../../src/protocol/schemas.ts";
import { startCluster } from "./cluster.ts";
import { fmt, settledRss, runBatch } from "./measure.ts";
import { cpuSeconds, load, median, quantile, rssMb } from "./proc.ts";
import { CALL_LOOP, CALL_UNTIL_STOPPED, CALL_UNTIL_STOPPED_CURL, CALL_UNTIL_STOPPED_KEEPALIVE, counts, results, submit, systemStatus, waitAll } from "./tasks.ts";

interface Sample {
  at: number;
  live: number;
  rss: number;
  cpu: number;
  load: string;
  /** The gateway's event-loop delay p99 over its last 5 s window (heartbeat metrics). */
  loopP99: number;
}

/** How each session's loop calls the proxy. */
export type Client = "keepalive" | "close" | "curl";
const CLIENTS: Record<Client, { command: string; what: string }> = {
  keepalive: { command: CALL_UNTIL_STOPPED_KEEPALIVE, what: "bash alone, one kept-alive connection per session, as HTTP client libraries do" },
  close: { command: CALL_UNTIL_STOPPED, what: "bash alone, a new connection per call, as curl does" },
  curl: { command: CALL_UNTIL_STOPPED_CURL, what: "curl and sleep processes started for every call" },
};

/**
 * One run per client in POLAR_BENCH_CLIENTS (default `keepalive,close`;
 * `curl` is the loop of earlier runs), then their added latencies side by side.
 */
export async function concurrent(n: number, small: boolean): Promise<void> {
  const clients = (process.env.POLAR_BENCH_CLIENTS ?? "keepalive,close").split(",") as Client[];
  for (const k of clients) if (!CLIENTS[k]) throw new Error(`POLAR_BENCH_CLIENTS: unknown client ${k} (known: ${Object.keys(CLIENTS).join(", ")})`);
  const rows: Array<[Client, number | undefined]> = [];
  for (const k of clients) rows.push([k, await concurrentRun(n, small, k)]);
  if (rows.length > 1) {
    console.log(`  side by side, proxy added latency median while all ${n} were live: ${rows.map(([k, ms]) => `${k} ${ms === undefined ? "n/a" : `${fmt(ms, 2)} ms`}`).join(", ")} (goal <= 5 ms)`);
  }
}

async function concurrentRun(n: number, small: boolean, client: Client): Promise<number | undefined> {
  const think = 10;
  // POLAR_BENCH_BIND=off: credentials not bound to their process tree (no /proc lookup per connection).
  const bind = process.env.POLAR_BENCH_BIND === "off" ? "off" : "auto";
  let plateauMedian: number | undefined;

  const holdS = small ? 10 : 30;
  console.log(
    `\n[concurrent, ${client}] ${n} sessions live at once on one gateway, each a shell loop: ${think} s think time, one model call (${CLIENTS[client].what}), again, until released; measured for ${holdS} s once all are live (local runtime, isolation none, bind_credentials ${bind})`,
  );
  const gateway = { max_init_workers: 32, max_run_workers: n, ready_capacity: 64, max_postrun_workers: 16, proxy: { bind_credentials: bind } };
  const c = await startCluster({ sim: ["--slots", "256", "--ttft-ms", "10"], gateway, gateways: 1 });
  const gw = c.gateways[0];
  const dir = await mkdtemp(join(tmpdir(), "polar-bench-stop-"));
  const stopFile = join(dir, "stop");
  try {
    await runBatch(c, "warm", { command: CALL_LOOP, env: { CALLS: "1", THINK: "0" }, num_samples: 16 });
    const idleRss = await settledRss(gw);
    const t0 = performance.now();
    const liveDir = join(dir, "live");
    await mkdir(liveDir);
    const id = await submit(c.nc, `concurrent-${process.pid}`, { command: CLIENTS[client].command, env: { STOP_FILE: stopFile, THINK: String(think), LIVE_DIR: liveDir }, num_samples: n });
    const samples: Sample[] = [];
    let plateauSince: number | undefined;
    const deadline = Date.now() + 900_000;
    for (;;) {
      const st = await systemStatus(c.nc).catch(() => undefined);
      // Live: the gateway holds the session in RUN and its harness process has started.
      const m = st?.nodes.find((x) => x.node_id === "bench-gw-0")?.metrics;
      const live = Math.min(m?.run_inflight ?? 0, (await readdir(liveDir)).length);
      const s = { at: performance.now(), live, rss: rssMb(gw.pid), cpu: cpuSeconds(gw.pid), load: load(), loopP99: m?.loop_delay_p99_ms ?? 0 };
      samples.push(s);
      if (live >= 0.98 * n) plateauSince ??= s.at;
      if ((plateauSince !== undefined && s.at - plateauSince >= holdS * 1000) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const rampS = ((plateauSince ?? performance.now()) - t0) / 1000;
    const toWall = (perf: number) => Date.now() - (performance.now() - perf);
    const plateauWall = plateauSince === undefined ? undefined : toWall(plateauSince);
    const releasedWall = Date.now();
    await writeFile(stopFile, "");
    const st = await waitAll(c.nc, [id]);
    const secs = (performance.now() - t0) / 1000;
    const maxLive = Math.max(...samples.map((s) => s.live));
    // Never all live (sessions ended or the ramp was too slow): measure where the most were live.
    const plateau = samples.filter((s) => (plateauSince !== undefined ? s.at >= plateauSince : s.live >= 0.95 * maxLive));
    console.log(`  ${n} sessions (${counts(st)}) in ${fmt(secs)} s: all live after ${fmt(rampS)} s; most live at once ${maxLive}; idle gateway RSS ${fmt(idleRss)} MB`);
    if (plateau.length >= 2) {
      const first = plateau[0];
      const last = plateau[plateau.length - 1];
      const live = median(plateau.map((s) => s.live));
      const rss = median(plateau.map((s) => s.rss));
      const cores = (last.cpu - first.cpu) / ((last.at - first.at) / 1000);
      console.log(
        `  while ${fmt(live, 0)} live (${fmt((last.at - first.at) / 1000)} s): gateway RSS ${fmt(rss)} MB = ${fmt(((rss - idleRss) * 1024) / live, 0)} KB per live session above idle (${fmt(rss / live, 2)} MB per session counting the whole process; goal <= 2 MB); gateway CPU ${fmt(cores * 100)}% of one core = ${fmt((cores * 100) / live, 3)}% per live session; gateway event-loop delay p99 (median of its 5 s windows) ${fmt(median(plateau.map((s) => s.loopP99)), 1)} ms; ${plateau[plateau.length >> 1].load}`,
      );
    } else console.log(`  never reached ${n} live sessions (the most was ${maxLive}): no plateau to measure`);
    if (plateauSince === undefined) console.log(`  NOT all ${n} live at once within the deadline: the figures above are for the ${maxLive} that were`);
    const r = await results(c.nc, id, n, 10);
    const added = addedLatency(r);
    const stats = (xs: number[]) => `median ${fmt(median(xs), 2)} ms, p90 ${fmt(quantile(xs, 0.9), 2)} ms, p99 ${fmt(quantile(xs, 0.99), 2)} ms`;
    const line = (what: string, xs: Added[]) =>
      `  proxy added latency (client time_total - proxy upstream_ms), ${what}, ${xs.length} calls: ${stats(xs.map((x) => x.ms))} (goal median <= 5 ms)\n` +
      `    of it inside the proxy before the upstream call (proxy_in_ms): ${stats(xs.map((x) => x.proxyIn))}; the peer check (admit_ms): ${stats(xs.map((x) => x.admit))}; ` +
      `the rest (before the proxy saw the request, or after it answered): median ${fmt(median(xs.map((x) => x.ms - x.proxyIn)), 2)} ms`;
    if (plateauWall !== undefined) {
      const onPlateau = added.filter((x) => x.at >= plateauWall! && x.at <= releasedWall);
      if (onPlateau.length) plateauMedian = median(onPlateau.map((x) => x.ms));
      console.log(line(`while all ${n} were live`, onPlateau));
    }
    console.log(line("during the ramp (sessions still starting)", added.filter((x) => plateauWall === undefined || x.at < plateauWall)));
    console.log(`  upstream_ms median ${fmt(median(upstreamMs(r)), 2)} ms`);
    return plateauMedian;
  } finally {
    await writeFile(stopFile, "").catch(() => undefined); // lets the sessions end if we failed midway
    await c.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

function records(r: SessionResult) {
  return [...(r.completion_session?.completions ?? [])].sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
}

function upstreamMs(rs: SessionResult[]): number[] {
  return rs.flatMap((r) => records(r).map((x) => Number((x.metadata.inference_timings as Record<string, number> | undefined)?.upstream_ms)));
}

interface Added {
  /** When the proxy recorded the call (epoch ms). */
  at: number;
  /** Client time minus the proxy's upstream time. */
  ms: number;
  /** The proxy's own time before the upstream call, and its peer check (from the record's timings). */
  proxyIn: number;
  admit: number;
}

/** Per call: client time minus the proxy's upstream time, pairing the i-th curl line with the i-th record (calls are sequential). */
export function addedLatency(rs: SessionResult[]): Added[] {
  const out: Added[] = [];
  for (const r of rs) {
    const tail = String(r.agent_result?.metadata?.stdout_tail ?? "");
    const client = tail.split("\n").filter((l) => /^\d+(\.\d+)?$/.test(l.trim())).map((l) => Number(l) * 1000);
    const recs = records(r);
    if (client.length !== recs.length) continue; // a call that got no record (failed): not comparable
    recs.forEach((x, i) => {
      const t = (x.metadata.inference_timings ?? {}) as Record<string, number>;
      const up = Number(t.upstream_ms);
      if (Number.isFinite(up)) out.push({ at: Date.parse(String(x.timestamp)), ms: client[i] - up, proxyIn: Number(t.proxy_in_ms ?? NaN), admit: Number(t.admit_ms ?? 0) });
    });
  }
  return out;
}
