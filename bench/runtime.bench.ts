/**
 * Runtime start-to-ready latency, median and p99 of 20 per backend, measured
 * side by side in one run: start() (resolves when commands can run), the
 * first exec of `true` after it, a warm exec, and stop(). Docker runs with and
 * without the proxy forwarder (network none vs host). Apptainer is measured
 * only where a binary exists.
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Dockerode from "dockerode";
import { RuntimeSpec } from "../src/protocol/schemas.ts";
import { probeBwrap } from "../src/runtimes/bwrap.ts";
import { createRuntimeRegistry } from "../src/runtimes/registry.ts";
import type { RuntimeContext } from "../src/runtimes/types.ts";
import { silentLogger } from "../src/util/log.ts";

const N = 20;
const IMAGE = process.env.POLAR_TEST_IMAGE ?? "polar-base:bookworm";

function stats(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)];
  return `median ${q(0.5).toFixed(1)} ms, p99 ${q(0.99).toFixed(1)} ms`;
}

interface Row {
  start: number[];
  firstExec: number[];
  warmExec: number[];
  stop: number[];
}

async function measure(label: string, spec: unknown, base: Omit<RuntimeContext, "sessionId" | "sessionDir">, registry: ReturnType<typeof createRuntimeRegistry>): Promise<void> {
  const row: Row = { start: [], firstExec: [], warmExec: [], stop: [] };
  const parsed = RuntimeSpec.parse(spec);
  for (let i = 0; i < N; i++) {
    const sessionDir = await mkdtemp(join(tmpdir(), "polar-bench-"));
    const rt = registry.resolve({ strategy: parsed.backend }, { spec: parsed, ctx: { ...base, sessionId: `bench${process.pid}x${i}`, sessionDir } });
    try {
      let t = performance.now();
      await rt.start();
      row.start.push(performance.now() - t);
      t = performance.now();
      const r = await rt.exec("true");
      if (r.exitCode !== 0) throw new Error(`${label}: exec failed: ${r.stderr}`);
      row.firstExec.push(performance.now() - t);
      t = performance.now();
      await rt.exec("true");
      row.warmExec.push(performance.now() - t);
    } finally {
      const t = performance.now();
      await rt.stop();
      row.stop.push(performance.now() - t);
      await rm(sessionDir, { recursive: true, force: true });
    }
  }
  const ready = row.start.map((s, i) => s + row.firstExec[i]);
  console.log(`runtime ${label}: start-to-ready (start + first exec) ${stats(ready)}; start() ${stats(row.start)}; warm exec ${stats(row.warmExec)}; stop ${stats(row.stop)}`);
}

async function dockerReady(docker: Dockerode): Promise<string | undefined> {
  try {
    await docker.ping();
    await docker.getImage(IMAGE).inspect();
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

export async function run(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "polar-bench-proxy-"));
  const socketPath = join(dir, "proxy.sock");
  const server = http.createServer((_req, res) => res.end("{}"));
  await new Promise<void>((r) => server.listen(socketPath, r));
  const docker = new Dockerode();
  const registry = createRuntimeRegistry({ docker });
  const base = { gatewayId: `bench-${process.pid}`, proxy: { url: "http://127.0.0.1:9", socketPath }, log: silentLogger() };
  try {
    await measure("local (plain processes)", { backend: "local", kwargs: { isolation: "none" } }, base, registry);
    if (probeBwrap()) await measure("local (bubblewrap, none network + forwarder)", { backend: "local", kwargs: { isolation: "bwrap" } }, base, registry);
    else console.log("runtime local (bubblewrap): skipped, bwrap not available");
    const why = await dockerReady(docker);
    if (why) console.log(`runtime docker: skipped (${why})`);
    else {
      await measure("docker (network none + forwarder)", { backend: "docker", image: IMAGE }, base, registry);
      await measure("docker (network host, no forwarder)", { backend: "docker", image: IMAGE, network: "host" }, base, registry);
    }
    const hasApptainer = (process.env.PATH ?? "").split(":").some((d) => d && existsSync(`${d}/apptainer`));
    console.log(hasApptainer ? "runtime apptainer: binary present but no image configured for the benchmark (skipped)" : "runtime apptainer: skipped (no apptainer binary on this host)");
  } finally {
    server.close();
    await rm(dir, { recursive: true, force: true });
  }
}
