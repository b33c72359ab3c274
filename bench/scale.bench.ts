/**
 * Measured limits of one machine's deployment, every process real
 * (nats-server, `polar sim`, `polar supervisor`, `polar gateway` processes
 * from bin/polar.js; local runtime, isolation none; a shell harness of curl
 * calls, so no Node starts per session). Parts, each printing medians and
 * ratios measured side by side in the same run, with the load average:
 *
 *   overhead   framework cost per session with a command that costs nothing (`true`)
 *   concurrent N live sessions on one gateway (default 1,024): gateway RSS and CPU per
 *              live session, proxy added latency under that load
 *   rss        gateway RSS after 10x the sessions vs after 1x (default 2,000 vs 200;
 *              POLAR_BENCH_RSS_SESSIONS=10000 for 10,000 vs 1,000)
 *   gateways   sessions/s with 1, 2 and 4 gateway processes (same supervisor and nats-server)
 *   staging    upstream busy fraction with an expensive INIT (prepare `sleep 2`), staged
 *              versus INIT and RUN sharing one pool (`gateway.shared_init_run`)
 *
 * POLAR_BENCH_SCALE=small runs every part scaled down (about a minute or two);
 * POLAR_BENCH_PARTS=overhead,staging picks parts. Sizes: POLAR_BENCH_CONCURRENT,
 * POLAR_BENCH_RSS_SESSIONS (the larger count; the smaller is a tenth),
 * POLAR_BENCH_GATEWAY_SESSIONS, POLAR_BENCH_STAGING_SESSIONS, POLAR_BENCH_OVERHEAD_SESSIONS.
 */
import { concurrent } from "./scale/concurrent.ts";
import { gateways, overhead, rssGrowth } from "./scale/throughput.ts";
import { staging } from "./scale/staging.ts";
import { load } from "./scale/proc.ts";

const small = process.env.POLAR_BENCH_SCALE === "small";
const size = (name: string, dflt: number, smallDflt: number) => Number(process.env[name] ?? (small ? smallDflt : dflt));
const parts = (process.env.POLAR_BENCH_PARTS ?? "overhead,concurrent,rss,gateways,staging").split(",");

export async function run(): Promise<void> {
  console.log(`scale benchmark (${small ? "small" : "default"} scale), ${load()}`);
  const t0 = performance.now();
  if (parts.includes("staging")) await staging(size("POLAR_BENCH_STAGING_SESSIONS", 32, 16));
  if (parts.includes("concurrent")) await concurrent(size("POLAR_BENCH_CONCURRENT", 1024, 64), small);
  if (parts.includes("overhead")) await overhead(size("POLAR_BENCH_OVERHEAD_SESSIONS", 200, 50));
  if (parts.includes("gateways")) await gateways(size("POLAR_BENCH_GATEWAY_SESSIONS", 120, 32));
  if (parts.includes("rss")) await rssGrowth(size("POLAR_BENCH_RSS_SESSIONS", 2000, 500));
  console.log(`scale benchmark done in ${((performance.now() - t0) / 1000).toFixed(0)} s, ${load()}`);
}
