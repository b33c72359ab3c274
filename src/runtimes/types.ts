/**
 * A runtime is the sandbox one session's harness runs in. All paths given to
 * a runtime are paths inside the sandbox unless named `local…`.
 *
 * Contract:
 * - `start()` resolves when commands can run; it rejects with a PolarError
 *   (code `runtime`) and leaves nothing behind.
 * - `stop()` is idempotent and never rejects for an already-stopped runtime.
 * - `cancel()` kills every in-flight process (its whole tree), then stops.
 * - `exec()` never rejects for a non-zero exit or a timeout: it resolves with
 *   `exitCode` (-1 and `timedOut: true` when the timeout or signal fired) and
 *   rejects only when the runtime itself is unusable.
 */
import type { Logger } from "pino";
import type { RuntimeSpec } from "../protocol/schemas.ts";
import type { Factory } from "../util/registry.ts";

export interface ExecOptions {
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Written to the process's stdin, then closed. Default: stdin is /dev/null. */
  stdin?: string;
  /** Category for timing statistics (e.g. "prepare", "agent", "eval"). */
  category?: string;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  /** -1 when the process was killed for a timeout or cancellation. */
  exitCode: number;
  timedOut: boolean;
  cancelled: boolean;
  durationMs: number;
}

export interface ExecStats {
  count: number;
  ms: number;
  timeouts: number;
  failures: number;
  cancelled: number;
  exceptions: number;
  msByCategory: Record<string, number>;
  countByCategory: Record<string, number>;
}

export interface Runtime {
  readonly id: string;
  readonly backend: string;
  /** The workspace directory inside the sandbox (the task's `workdir`, or a default). */
  readonly workdir: string;
  /** The HOME of the agent inside the sandbox (harness config files go here). */
  readonly home: string;
  /** Base URL (no path) at which the model proxy is reachable from inside the sandbox. */
  readonly proxyUrl: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  cancel(): Promise<void>;
  exec(command: string, opts?: ExecOptions): Promise<ExecResult>;
  /** Copies a local file or directory (recursively, modes kept) into the sandbox. */
  upload(localPath: string, remotePath: string): Promise<void>;
  /** Copies a file or directory out of the sandbox. */
  download(remotePath: string, localPath: string): Promise<void>;
  writeFile(remotePath: string, content: string | Uint8Array, mode?: number): Promise<void>;
  readFile(remotePath: string): Promise<Uint8Array>;
  execStats(): ExecStats;
  /**
   * How this sandbox's processes reach the model proxy, so the proxy can
   * refuse the session's credential from anywhere else: `socket` (only
   * through `ctx.proxy.socketPath`), `tcp` (over host TCP, from the trees
   * below `roots()`, host pids). Undefined when the runtime cannot tell.
   */
  proxyPeers?(): ProxyPeers | undefined;
}

export type ProxyPeers = { via: "socket" } | { via: "tcp"; roots(): Iterable<number> | Promise<Iterable<number>> };

export interface RuntimeContext {
  sessionId: string;
  /** A second runtime of the same session ("eval": the fresh evaluation runtime) gets its own name. */
  role?: "eval";
  gatewayId: string;
  /** Host-side model proxy endpoint: a TCP URL, and a Unix socket path when the proxy listens on one. */
  proxy: { url: string; socketPath?: string };
  /** A host directory the runtime may use for this session's files. */
  sessionDir: string;
  /** Host directory of pinned harness CLIs and a Node runtime, mounted read-only when present. */
  toolsDir?: string;
  log: Logger;
}

export type RuntimeFactory = Factory<Runtime, { spec: RuntimeSpec; ctx: RuntimeContext }>;
