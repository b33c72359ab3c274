/**
 * Runs one host process in its own process group and resolves with its
 * bounded output, exit code and whether a timeout or cancellation killed it.
 * Killing takes the whole tree: the process group, plus any descendant that
 * left the group (setsid) found by walking /proc before the kill.
 */
import { fork, spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { processTree } from "../proxy/peer-proc.ts";
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

/** Pids of every live descendant of `root` (walked down from it through /proc; see processTree). */
export function descendants(root: number): number[] {
  return [...processTree([root]).keys()].filter((p) => p !== root);
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
  return spawnerWanted() ? viaSpawner(argv, opts) : direct(argv, opts);
}

/** Whether host processes are started by the spawner process (default) or by this one (`POLAR_SPAWNER=off`). */
function spawnerWanted(): boolean {
  return process.env.POLAR_SPAWNER !== "off";
}

/** Starts the process from this one: its event loop blocks in fork and exec. */
function direct(argv: string[], opts: ProcessOptions): Promise<ExecResult> {
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
    let exitCode: number | null = null;
    const watch = watchdog(opts, () => {
      if (child.pid !== undefined && exitCode === null) killTree(child.pid);
    });
    let settled = false;
    const finish = (): void => {
      if (settled) return;
      settled = true;
      watch.done();
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolve(result(out.text(), err.text(), exitCode, watch, started));
    };
    child.stdout!.on("data", (c: Buffer) => out.push(c));
    child.stderr!.on("data", (c: Buffer) => err.push(c));
    child.on("error", (e) => {
      if (settled) return;
      settled = true;
      watch.done();
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
      exitCode = exitCodeOf(code, sig);
      // Orphans that kept our pipes open must not hold the result hostage. After the grace, one more
      // pass over I/O (setImmediate runs after the poll phase) reads what the pipes already hold.
      setTimeout(() => setImmediate(finish), PIPE_GRACE_MS).unref();
    });
    child.on("close", finish);
  });
}

interface Watch {
  timedOut: boolean;
  cancelled: boolean;
  done(): void;
}

/** The timeout and the abort signal of one run: either marks the run and calls `kill`. */
function watchdog(opts: ProcessOptions, kill: () => void): Watch {
  const w: Watch = { timedOut: false, cancelled: false, done: () => undefined };
  const onAbort = (): void => {
    w.cancelled = true;
    w.timedOut = true;
    kill();
  };
  const timer =
    opts.timeoutMs !== undefined && opts.timeoutMs > 0
      ? setTimeout(() => {
          w.timedOut = true;
          kill();
        }, opts.timeoutMs)
      : undefined;
  timer?.unref();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  w.done = () => {
    if (timer) clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onAbort);
  };
  return w;
}

function result(stdout: string, stderr: string, exitCode: number | null, w: Watch, started: number): ExecResult {
  const killed = w.timedOut || w.cancelled;
  return { stdout, stderr, exitCode: killed ? -1 : (exitCode ?? -1), timedOut: w.timedOut, cancelled: w.cancelled, durationMs: performance.now() - started };
}

function exitCodeOf(code: number | null, sig: NodeJS.Signals | string | null): number {
  return code ?? (sig ? 128 + signalNumber(sig) : -1);
}

// ---- the spawner process ----------------------------------------------------

const SPAWNER = fileURLToPath(new URL("./assets/spawner.mjs", import.meta.url));

type SpawnerReply =
  | { op: "spawned"; id: number; pid: number }
  | { op: "done"; id: number; stdout: string; stderr: string; code: number | null; signal: string | null }
  | { op: "error"; id: number; message: string; code?: string; errno?: number; syscall?: string; path?: string };

interface PendingRun {
  onSpawned(pid: number): void;
  onDone(r: Extract<SpawnerReply, { op: "done" }>): void;
  onError(e: Error): void;
  pid?: number;
}

/**
 * One spawner process, forked on first use and again after it died. While
 * runs are pending it keeps this process alive; idle, it does not.
 */
class Spawner {
  #child: ChildProcess | undefined;
  readonly #runs = new Map<number, PendingRun>();
  #nextId = 1;

  run(m: { argv: string[]; cwd?: string; env?: Record<string, string>; stdin?: string; maxOutputBytes: number }, p: PendingRun): void {
    const child = this.#ensure();
    const id = this.#nextId++;
    this.#runs.set(id, p);
    this.#ref();
    child.send({ op: "run", id, graceMs: PIPE_GRACE_MS, ...m }, (err) => {
      if (err) this.#settle(id)?.onError(new Error(`could not hand ${m.argv[0]} to the process spawner: ${err.message}`));
    });
  }

  #ensure(): ChildProcess {
    if (this.#child && this.#child.connected) return this.#child;
    // A plain script: no loader flags of this process (execArgv), a small heap.
    const child = fork(SPAWNER, [], { execArgv: ["--max-old-space-size=256"], stdio: ["ignore", "inherit", "inherit", "ipc"], serialization: "json" });
    child.on("message", (m: SpawnerReply) => this.#onMessage(m));
    child.on("exit", (code, sig) => this.#lost(child, `the process spawner exited (${sig ?? `code ${code}`})`));
    child.on("error", (e) => this.#lost(child, `the process spawner failed: ${e.message}`));
    this.#child = child;
    this.#unref();
    return child;
  }

  #onMessage(m: SpawnerReply): void {
    const p = this.#runs.get(m.id);
    if (!p) return;
    if (m.op === "spawned") {
      p.pid = m.pid;
      p.onSpawned(m.pid);
    } else if (m.op === "done") {
      this.#settle(m.id)?.onDone(m);
    } else {
      this.#settle(m.id)?.onError(Object.assign(new Error(m.message), { code: m.code, errno: m.errno, syscall: m.syscall, path: m.path }));
    }
  }

  /** The spawner died: its runs' processes are killed (nobody reads their output now) and the runs fail. */
  #lost(child: ChildProcess, why: string): void {
    if (this.#child !== child) return;
    this.#child = undefined;
    const runs = [...this.#runs.values()];
    this.#runs.clear();
    this.#unref();
    for (const p of runs) {
      if (p.pid !== undefined) killTree(p.pid);
      p.onError(new Error(why));
    }
  }

  #settle(id: number): PendingRun | undefined {
    const p = this.#runs.get(id);
    this.#runs.delete(id);
    if (this.#runs.size === 0) this.#unref();
    return p;
  }

  #ref(): void {
    const c = this.#child as (ChildProcess & { channel?: { ref(): void } }) | undefined;
    c?.ref();
    c?.channel?.ref();
  }

  #unref(): void {
    const c = this.#child as (ChildProcess & { channel?: { unref(): void } }) | undefined;
    c?.unref();
    c?.channel?.unref();
  }

  /** The spawner's pid while it runs. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Runs handed to it and not finished. */
  get pending(): number {
    return this.#runs.size;
  }
}

/**
 * Spawner processes (`POLAR_SPAWNERS`, default one per core up to 4): each
 * waits for its children to exec, which on a loaded host is mostly waiting to
 * be scheduled, so several start processes faster than one.
 */
const spawners: Spawner[] = [];

function pickSpawner(): Spawner {
  if (!spawners.length) {
    const n = Number(process.env.POLAR_SPAWNERS) || Math.min(4, availableParallelism());
    for (let i = 0; i < Math.max(1, Math.min(16, n)); i++) spawners.push(new Spawner());
  }
  return spawners.reduce((a, b) => (b.pending < a.pending ? b : a));
}

/** The pids of this process's spawners that run now (for tests and diagnostics). */
export function spawnerPids(): number[] {
  return spawners.flatMap((s) => (s.pid === undefined ? [] : [s.pid]));
}

/** Starts the process through the spawner: this process's event loop never waits for fork or exec. */
function viaSpawner(argv: string[], opts: ProcessOptions): Promise<ExecResult> {
  const started = performance.now();
  return new Promise<ExecResult>((resolve, reject) => {
    if (opts.signal?.aborted) {
      resolve({ stdout: "", stderr: "", exitCode: -1, timedOut: true, cancelled: true, durationMs: 0 });
      return;
    }
    let pid: number | undefined;
    let killWanted = false;
    let ended = false;
    const watch = watchdog(opts, () => {
      if (ended) return;
      if (pid !== undefined) killTree(pid);
      else killWanted = true; // killed as soon as its pid is known
    });
    pickSpawner().run(
      { argv, cwd: opts.cwd, env: opts.env, stdin: opts.stdin, maxOutputBytes: opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES },
      {
        onSpawned(p) {
          pid = p;
          opts.onSpawn?.(p);
          if (killWanted) killTree(p);
        },
        onDone(r) {
          ended = true;
          watch.done();
          resolve(result(r.stdout, r.stderr, exitCodeOf(r.code, r.signal), watch, started));
        },
        onError(e) {
          ended = true;
          watch.done();
          reject(e);
        },
      },
    );
  });
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 };

function signalNumber(sig: string): number {
  return SIGNALS[sig] ?? 0;
}
