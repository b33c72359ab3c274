/**
 * One command in a running container through the Docker exec API: stdout and
 * stderr demultiplexed into bounded buffers, the exit code read back, and on a
 * timeout or abort every process of the exec killed. Each exec carries a
 * marker variable; the kill is a second exec that SIGKILLs every process whose
 * environment holds it, which reaches the whole tree, setsid escapees included.
 */
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import type Dockerode from "dockerode";
import { runtimeError } from "./common.ts";
import { BoundedSink, DEFAULT_MAX_OUTPUT_BYTES } from "./process.ts";
import type { ExecResult } from "./types.ts";

export const EXEC_MARKER_ENV = "POLAR_EXEC_ID";
/** After a kill, how long the exec's stream may take to end before we stop waiting. */
const KILL_GRACE_MS = 3000;

export interface DockerExecOptions {
  cwd: string;
  env: Record<string, string>;
  timeoutMs?: number;
  signal: AbortSignal;
  stdin?: string;
}

/** A POSIX sh script that SIGKILLs every process whose environment has `NAME=value`. */
export function killScript(name: string, value: string): string {
  const needle = `${name}=${value}`;
  return `for d in /proc/[0-9]*; do p=\${d#/proc/}; [ "$p" = "$$" ] && continue; if tr '\\0' '\\n' < "$d/environ" 2>/dev/null | grep -qx '${needle}'; then kill -9 "$p" 2>/dev/null; fi; done; true`;
}

function sinkWriter(sink: BoundedSink): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, cb) {
      sink.push(chunk);
      cb();
    },
  });
}

export async function dockerExec(docker: Dockerode, container: Dockerode.Container, command: string, o: DockerExecOptions): Promise<ExecResult> {
  const started = performance.now();
  if (o.signal.aborted) return { stdout: "", stderr: "", exitCode: -1, timedOut: true, cancelled: true, durationMs: 0 };
  const marker = randomUUID();
  const env = { ...o.env, [EXEC_MARKER_ENV]: marker };
  const exec = await container.exec({
    Cmd: ["/bin/bash", "-c", command],
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    WorkingDir: o.cwd,
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: o.stdin !== undefined,
    Tty: false,
  });
  const stream = await exec.start({ hijack: true, stdin: o.stdin !== undefined });
  const out = new BoundedSink(DEFAULT_MAX_OUTPUT_BYTES);
  const err = new BoundedSink(DEFAULT_MAX_OUTPUT_BYTES);
  docker.modem.demuxStream(stream, sinkWriter(out), sinkWriter(err));
  if (o.stdin !== undefined) stream.end(o.stdin);

  let timedOut = false;
  let cancelled = false;
  let killing: Promise<void> | undefined;
  const kill = (): void => {
    killing ??= killMarked(container, marker);
  };
  const ended = new Promise<void>((resolve) => {
    stream.on("end", resolve);
    stream.on("close", resolve);
    stream.on("error", resolve);
  });
  const onAbort = (): void => {
    cancelled = timedOut = true;
    kill();
  };
  o.signal.addEventListener("abort", onAbort, { once: true });
  const timer = o.timeoutMs && o.timeoutMs > 0 ? setTimeout(() => ((timedOut = true), kill()), o.timeoutMs) : undefined;
  timer?.unref();
  try {
    await ended;
  } finally {
    if (timer) clearTimeout(timer);
    o.signal.removeEventListener("abort", onAbort);
  }
  if (killing) {
    await Promise.race([killing, delay(KILL_GRACE_MS)]);
    stream.destroy();
  }
  const exitCode = timedOut ? -1 : await exitCodeOf(exec);
  return { stdout: out.text(), stderr: err.text(), exitCode, timedOut, cancelled, durationMs: performance.now() - started };
}

async function killMarked(container: Dockerode.Container, marker: string): Promise<void> {
  try {
    const exec = await container.exec({ Cmd: ["/bin/sh", "-c", killScript(EXEC_MARKER_ENV, marker)], AttachStdout: true, AttachStderr: true });
    const s = await exec.start({ hijack: true, stdin: false });
    s.resume();
    await new Promise<void>((r) => {
      s.on("end", r);
      s.on("close", r);
      s.on("error", r);
    });
  } catch {
    // the container is gone: so are the processes
  }
}

async function exitCodeOf(exec: Dockerode.Exec): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const info = await exec.inspect();
    if (!info.Running && info.ExitCode !== null) return info.ExitCode;
    await delay(10);
  }
  throw runtimeError("docker exec did not report an exit code");
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}
