/**
 * A real deployment on one machine for the scale benchmarks: nats-server,
 * `polar sim`, `polar supervisor` and any number of `polar gateway`
 * processes, each its own OS process started from bin/polar.js, so RSS and
 * CPU can be read per process from /proc. Logs go to files in a temporary
 * directory (kept when POLAR_BENCH_KEEP is set).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { NatsConnection } from "@nats-io/transport-node";
import { closeNats, connectNats } from "../../src/nats/infra.ts";
import { startNatsServer, type NatsServerHandle } from "../../src/nats/launcher.ts";

const BIN = fileURLToPath(new URL("../../bin/polar.js", import.meta.url));

export interface Proc {
  name: string;
  pid: number;
  /** The first line the process printed on stdout (its address). */
  banner: string;
  stop(): Promise<void>;
}

export interface ClusterOptions {
  /** Flags of `polar sim`. */
  sim: string[];
  /** The `gateway` section of each gateway's config file. */
  gateway: Record<string, unknown>;
  gateways: number;
}

export interface Cluster {
  nats: NatsServerHandle;
  nc: NatsConnection;
  sim: Proc & { url: string };
  supervisor: Proc;
  gateways: Proc[];
  /** Starts one more gateway (with this `gateway` config section, default the cluster's). */
  addGateway(gateway?: Record<string, unknown>): Promise<Proc>;
  stop(): Promise<void>;
}

/** Starts `polar ARGS` and resolves once it printed its first stdout line. */
async function startPolar(name: string, args: string[], dir: string, env: Record<string, string> = {}): Promise<Proc> {
  const log = createWriteStream(join(dir, `${name}.log`));
  // POLAR_BENCH_PROFILE=DIR: CPU profiles of every polar process (written when it exits).
  const prof = process.env.POLAR_BENCH_PROFILE ? ["--cpu-prof", "--cpu-prof-dir", process.env.POLAR_BENCH_PROFILE, "--cpu-prof-name", `${name}.cpuprofile`] : [];
  const child: ChildProcess = spawn(process.execPath, [...prof, BIN, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, POLAR_LOG_FORMAT: "json", ...env },
  });
  child.stderr!.pipe(log);
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const banner = await new Promise<string>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 120 s (log: ${dir}/${name}.log)`)), 120_000);
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf("\n");
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(out.slice(0, nl));
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} before starting (log: ${dir}/${name}.log)`));
    });
  });
  child.stdout!.resume();
  return {
    name,
    pid: child.pid!,
    banner,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGTERM"), 5000); // a second signal: requeue and stop now
      const k = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(t);
      clearTimeout(k);
    },
  };
}

export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const dir = await mkdtemp(join(tmpdir(), "polar-bench-scale-"));
  const procs: Proc[] = [];
  const nats = await startNatsServer();
  let nc: NatsConnection | undefined;
  let addGateway: Cluster["addGateway"] = () => Promise.reject(new Error("not started"));
  const stop = async () => {
    await Promise.all(procs.filter((p) => p.name.startsWith("gateway")).map((p) => p.stop()));
    await Promise.all(procs.filter((p) => !p.name.startsWith("gateway")).map((p) => p.stop()));
    if (nc) await closeNats(nc);
    await nats.stop();
    if (!process.env.POLAR_BENCH_KEEP) await rm(dir, { recursive: true, force: true });
    else console.log(`  (logs kept in ${dir})`);
  };
  try {
    const sim = await startPolar("sim", ["sim", "--port", "0", ...o.sim], dir);
    procs.push(sim);
    const supervisor = await startPolar("supervisor", ["supervisor", "--nats", nats.url, "--http-port", "0"], dir);
    procs.push(supervisor);
    const gateways: Proc[] = [];
    addGateway = async (gateway: Record<string, unknown> = o.gateway) => {
      const i = gateways.length;
      const config = join(dir, `gateway-${i}.json`);
      await writeFile(config, JSON.stringify({ gateway: { heartbeat_interval_ms: 1000, work_root: join(dir, `work-${i}`), ...gateway } }));
      const args = ["gateway", "-c", config, "--nats", nats.url, "--upstream", sim.banner.trim(), "--node-id", `bench-gw-${i}`, "--no-evaluator"];
      const gw = await startPolar(`gateway-${i}`, args, dir);
      procs.push(gw);
      gateways.push(gw);
      return gw;
    };
    for (let i = 0; i < o.gateways; i++) await addGateway();
    nc = await connectNats(nats.url, "polar-bench");
    return { nats, nc, sim: { ...sim, url: sim.banner.trim() }, supervisor, gateways, addGateway, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
