/**
 * The `polar` CLI as a real child process for tests: its own process group
 * (so a test can signal the whole group as a service manager does), output
 * collected, waits for a line with a deadline.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("../..", import.meta.url));

export interface PolarProcess {
  child: ChildProcess;
  pid: number;
  /** Resolves with the first match of `re` in stdout+stderr, or rejects at the deadline or on exit. */
  waitFor(re: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
  /** Resolves with the exit code (or the signal name) once the process has exited. */
  readonly exited: Promise<number | string>;
  output(): string;
  /** Sends a signal to the process, or to its whole process group. */
  signal(sig: NodeJS.Signals, group?: boolean): void;
  /** Whether any process of its group is still alive. */
  groupAlive(): boolean;
}

export function spawnPolar(args: string[], env: Record<string, string> = {}): PolarProcess {
  const child = spawn(process.execPath, ["bin/polar.js", ...args], {
    cwd: REPO,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let out = "";
  const listeners = new Set<() => void>();
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const l of listeners) l();
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<number | string>((resolve) => child.once("exit", (code, sig) => resolve(code ?? sig ?? -1)));
  return {
    child,
    pid: child.pid!,
    exited,
    output: () => out,
    waitFor(re, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = out.match(re);
          if (!m) return;
          done();
          resolve(m);
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`no ${re} within ${timeoutMs} ms; output:\n${out.slice(-3000)}`));
        }, timeoutMs);
        const onExit = () => {
          done();
          reject(new Error(`exited before ${re}; output:\n${out.slice(-3000)}`));
        };
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
          child.off("exit", onExit);
        };
        listeners.add(check);
        child.once("exit", onExit);
        check();
      });
    },
    signal(sig, group = false) {
      try {
        process.kill(group ? -child.pid! : child.pid!, sig);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err; // already gone
      }
    },
    groupAlive() {
      try {
        process.kill(-child.pid!, 0);
        return true;
      } catch {
        return false;
      }
    },
  };
}

/** Resolves with the value, or rejects after `ms` (for bounded waits on exits). */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => (t = setTimeout(() => reject(new Error(`${what} not within ${ms} ms`)), ms)))]).finally(() => clearTimeout(t));
}
