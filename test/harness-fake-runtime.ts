/**
 * A tiny Runtime over a temporary directory, for the adapters' unit tests
 * only (what they write and which commands they run). End-to-end tests use
 * the real runtimes.
 */
import { spawn } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { ExecOptions, ExecResult, ExecStats, Runtime } from "../src/runtimes/types.ts";

export interface FakeRuntime extends Runtime {
  root: string;
  execs: { command: string; opts?: ExecOptions }[];
}

export async function fakeRuntime(proxyUrl = "http://127.0.0.1:9"): Promise<FakeRuntime> {
  const root = await mkdtemp(join(tmpdir(), "polar-harness-"));
  const home = join(root, "home");
  const workdir = join(root, "work");
  await mkdir(home, { recursive: true });
  await mkdir(workdir, { recursive: true });
  const execs: FakeRuntime["execs"] = [];
  const stats: ExecStats = { count: 0, ms: 0, timeouts: 0, failures: 0, cancelled: 0, exceptions: 0, msByCategory: {}, countByCategory: {} };
  return {
    id: "fake",
    backend: "fake",
    root,
    home,
    workdir,
    proxyUrl,
    execs,
    async start() {},
    async stop() {
      await rm(root, { recursive: true, force: true });
    },
    async cancel() {},
    async exec(command, opts) {
      execs.push({ command, opts });
      stats.count++;
      const started = Date.now();
      const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", ...opts?.env, HOME: home };
      const child = spawn("bash", ["-c", command], { cwd: opts?.cwd ?? workdir, env, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      const exitCode = await new Promise<number>((res) => child.on("close", (c) => res(c ?? -1)));
      const r: ExecResult = { stdout, stderr, exitCode, timedOut: false, cancelled: false, durationMs: Date.now() - started };
      return r;
    },
    async upload(localPath, remotePath) {
      await mkdir(dirname(remotePath), { recursive: true });
      await cp(localPath, remotePath, { recursive: true });
    },
    async download(remotePath, localPath) {
      await cp(remotePath, localPath, { recursive: true });
    },
    async writeFile(remotePath, content, mode) {
      await mkdir(dirname(remotePath), { recursive: true });
      await writeFile(remotePath, content, { mode });
    },
    async readFile(remotePath) {
      return new Uint8Array(await readFile(remotePath));
    },
    execStats: () => stats,
  };
}
