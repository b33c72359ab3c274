/**
 * Runs one host process in its own process group and resolves with its
 * bounded output, exit code and whether a timeout or cancellation killed it.
 * Killing takes the whole tree: the process group, plus any descendant that
 * left the group (setsid) found by walking /proc before the kill.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { findMarked } from "./marked-scan.ts";
import type { ExecResult } from "./types.ts";

export interface ProcessOptions {
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
  signal?: AbortSignal;
  stdin?: string;
  /** Bytes kept per stream; the rest is dropped and counted (default 16 MiB). */
  maxOutputBytes?: number;
  /** Called with the pid once the process is running (for cancel bookkeeping). */
  onSpawn?: (pid: number) => void;
}

export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
/** After the main process exits, how long its pipes may stay open (held by an orphan). */
const PIPE_GRACE_MS = 200;

/** Collects at most `max` bytes of a stream and counts what it dropped. */
export class BoundedSink {
  readonly #chunks: Buffer[] = [];
  #kept = 0;
  #dropped = 0;
  constructor(readonly max: number) {}

  push(chunk: Buffer): void {
    const room = this.max - this.#kept;
    if (room > 0) {
      const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
      this.#chunks.push(part);
      this.#kept += part.length;
    }
    this.#dropped += Math.max(0, chunk.length - Math.max(0, room));
  }

  text(): string {
    const s = Buffer.concat(this.#chunks).toString("utf8");
    return this.#dropped > 0 ? `${s}\n[polar: ${this.#dropped} more bytes dropped]` : s;
  }
}

/** Pids of every live descendant of `root` (children first found by ppid in /proc). */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const e of safeReaddir("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(e));
      children.set(ppid, list);
    } catch {
      // the process exited while we looked
    }
  }
  const out: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const c of children.get(queue.shift()!) ?? []) {
      out.push(c);
      queue.push(c);
    }
  }
  return out;
}

/** SIGKILLs a process group and every descendant of its leader. Never throws. */
export function killTree(pid: number): void {
  const tree = descendants(pid);
  for (const target of [-pid, pid, ...tree]) {
    try {
      process.kill(target, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

/** Every sandboxed host process carries this variable naming its runtime, so stop() finds strays. */
export const MARKER_ENV = "POLAR_RUNTIME_ID";
/** …and this one naming its gateway, so a restarted gateway reaps what it left behind. */
export const GATEWAY_MARKER_ENV = "POLAR_GATEWAY_ID";

/** Pids of live processes whose environment holds `name=value`. */
export function markedProcesses(name: string, value: string): number[] {
  const needle = Buffer.from(`\0${name}=${value}\0`);
  const out: number[] = [];
  for (const e of safeReaddir("/proc")) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const env = Buffer.concat([Buffer.from([0]), readFileSync(`/proc/${e}/environ`), Buffer.from([0])]);
      if (env.includes(needle)) out.push(Number(e));
    } catch {
      // exited, or not ours to read
    }
  }
  return out;
}

/** Live processes whose environment sets `name`, with its value. */
export function processesWithEnv(name: string): Array<{ pid: number; value: string }> {
  const key = Buffer.from(`\0${name}=`);
  const out: Array<{ pid: number; value: string }> = [];
  for (const e of safeReaddir("/proc")) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const env = Buffer.concat([Buffer.from([0]), readFileSync(`/proc/${e}/environ`), Buffer.from([0])]);
      const at = env.indexOf(key);
      if (at < 0) continue;
      const start = at + key.length;
      out.push({ pid: Number(e), value: env.subarray(start, env.indexOf(0, start)).toString() });
    } catch {
      // exited, or not ours to read
    }
  }
  return out;
}

/** SIGKILLs every process marked with `name=value`; returns how many it found. */
export function killMarked(name: string, value: string): number {
  const pids = markedProcesses(name, value);
  for (const p of pids) {
    try {
      process.kill(p, "SIGKILL");
    } catch {
      // gone
    }
  }
  return pids.length;
}

/**
 * Kills every marked process, then waits (up to `timeoutMs`) until none is
 * left; resolves with how many remain. The /proc passes are shared with
 * concurrent callers (see marked-scan.ts).
 */
export async function killMarkedAndWait(name: string, value: string, timeoutMs = 3000): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const pids = await findMarked(name, value);
    for (const p of pids) {
      try {
        process.kill(p, "SIGKILL");
      } catch {
        // gone
      }
    }
    if (pids.length === 0 || performance.now() > deadline) return pids.length;
    await new Promise((r) => setTimeout(r, 20));
  }
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

export function runProcess(argv: string[], opts: ProcessOptions = {}): Promise<ExecResult> {
  const started = performance.now();
  const max = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const out = new BoundedSink(max);
  const err = new BoundedSink(max);
  return new Promise<ExecResult>((resolve, reject) => {
    if (opts.signal?.aborted) {
      resolve({ stdout: "", stderr: "", exitCode: -1, timedOut: true, cancelled: true, durationMs: 0 });
      return;
    }
    const child = spawn(argv[0], argv.slice(1), {
      cwd: opts.cwd,
      env: opts.env,
      detached: true,
      stdio: [opts.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    let timedOut = false;
    let cancelled = false;
    let exitCode: number | null = null;
    let settled = false;
    const kill = (): void => {
      if (child.pid !== undefined && exitCode === null) killTree(child.pid);
    };
    const onAbort = (): void => {
      cancelled = true;
      timedOut = true;
      kill();
    };
    const timer =
      opts.timeoutMs !== undefined && opts.timeoutMs > 0
        ? setTimeout(() => {
            timedOut = true;
            kill();
          }, opts.timeoutMs)
        : undefined;
    timer?.unref();
    opts.signal?.addEventListener("abort", onAbort, { once: true });

    const finish = (): void => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      child.stdout?.destroy();
      child.stderr?.destroy();
      const killed = timedOut || cancelled;
      resolve({
        stdout: out.text(),
        stderr: err.text(),
        exitCode: killed ? -1 : (exitCode ?? -1),
        timedOut,
        cancelled,
        durationMs: performance.now() - started,
      });
    };
    child.stdout!.on("data", (c: Buffer) => out.push(c));
    child.stderr!.on("data", (c: Buffer) => err.push(c));
    child.on("error", (e) => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      reject(e);
    });
    child.on("spawn", () => {
      if (child.pid !== undefined) opts.onSpawn?.(child.pid);
      if (opts.stdin !== undefined && child.stdin) {
        child.stdin.on("error", () => {}); // the process may exit without reading it
        child.stdin.end(opts.stdin);
      }
    });
    child.on("exit", (code, sig) => {
      exitCode = code ?? (sig ? 128 + signalNumber(sig) : -1);
      // Orphans that kept our pipes open must not hold the result hostage.
      setTimeout(finish, PIPE_GRACE_MS).unref();
    });
    child.on("close", finish);
  });
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 };

function signalNumber(sig: string): number {
  return SIGNALS[sig] ?? 0;
}
