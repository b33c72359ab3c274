/**
 * Runs a RuntimeSpec's prepare actions in order (POLAR-REFERENCE §1.5):
 * upload_file / upload_dir copy host paths into the sandbox; exec runs a
 * command, retried up to `max_attempts` times with a delay of
 * min(retry_backoff_seconds * 2^(attempt-1), 5 s) between attempts.
 *
 * Resolves when every action succeeded. Rejects with PolarError code
 * `runtime` naming the failed action (index, type, what it touched, last exit
 * code and stderr tail), or with `signal.reason` when the signal fires.
 */
import { stat } from "node:fs/promises";
import type { Logger } from "pino";
import { PolarError } from "../protocol/errors.ts";
import type { PrepareAction } from "../protocol/schemas.ts";
import { backoffMs, runtimeError } from "./common.ts";
import { realish, uploadRefusal } from "../security/upload-roots.ts";
import type { ExecResult, Runtime } from "./types.ts";

const STDERR_TAIL = 2000;

export interface PrepareOptions {
  signal: AbortSignal;
  log: Logger;
  /** Host directories uploads may come from (after symlinks); undefined: not checked here. */
  uploadRoots?: readonly string[];
}

export async function runPrepare(runtime: Runtime, actions: PrepareAction[], opts: PrepareOptions): Promise<void> {
  for (const [index, action] of actions.entries()) {
    throwIfAborted(opts.signal);
    const t0 = performance.now();
    if (action.type === "exec") await runExec(runtime, action, index, opts);
    else await runUpload(runtime, action, index, opts.uploadRoots);
    opts.log.debug({ index, type: action.type, ms: Math.round(performance.now() - t0) }, "prepare action done");
  }
}

function describe(a: PrepareAction, index: number): string {
  const what = a.type === "exec" ? JSON.stringify(a.command) : `${a.source} -> ${a.target}`;
  return `prepare action ${index} (${a.type} ${what})`;
}

async function runUpload(runtime: Runtime, a: PrepareAction, index: number, roots?: readonly string[]): Promise<void> {
  let source = a.source!;
  if (roots) {
    const why = uploadRefusal(source, roots);
    if (why) throw new PolarError("forbidden", `${describe(a, index)} refused: ${why}`, { details: { index, type: a.type, reason: "upload_outside_roots", path: source } });
    source = realish(source); // copy what was checked, not what a swapped link points to later
  }
  let isDir: boolean;
  try {
    isDir = (await stat(source)).isDirectory();
  } catch (e) {
    throw runtimeError(`${describe(a, index)} failed: source does not exist`, e, { index, type: a.type });
  }
  if (isDir !== (a.type === "upload_dir")) {
    throw runtimeError(`${describe(a, index)} failed: source is ${isDir ? "a directory" : "not a directory"}`, undefined, { index, type: a.type });
  }
  try {
    await runtime.upload(source, a.target!);
  } catch (e) {
    throw runtimeError(`${describe(a, index)} failed: ${e instanceof Error ? e.message : String(e)}`, e, { index, type: a.type });
  }
}

async function runExec(runtime: Runtime, a: PrepareAction, index: number, opts: { signal: AbortSignal; log: Logger }): Promise<void> {
  let last: ExecResult | undefined;
  for (let attempt = 1; attempt <= a.max_attempts; attempt++) {
    if (attempt > 1) await sleep(backoffMs(a.retry_backoff_seconds, attempt - 1), opts.signal);
    last = await runtime.exec(a.command!, { cwd: a.cwd, env: a.env, signal: opts.signal, category: "prepare" });
    throwIfAborted(opts.signal);
    if (last.exitCode === 0) return;
    opts.log.warn({ index, attempt, maxAttempts: a.max_attempts, exitCode: last.exitCode }, "prepare exec failed");
  }
  const stderr = last!.stderr.slice(-STDERR_TAIL);
  throw runtimeError(`${describe(a, index)} failed after ${a.max_attempts} attempt(s): exit code ${last!.exitCode}: ${stderr.trim()}`, undefined, {
    index,
    type: a.type,
    exitCode: last!.exitCode,
    stderr,
  });
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new PolarError("cancelled", "prepare cancelled");
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal.reason instanceof Error ? signal.reason : new PolarError("cancelled", "prepare cancelled"));
    };
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    t.unref();
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
