/** Shared pieces of the CLI commands: where NATS is, the state file of `polar up`, shutdown. */
import { mkdir, readFile, writeFile, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { PolarError } from "../protocol/errors.ts";

export function upStatePath(): string {
  return process.env.POLAR_STATE_FILE ?? join(homedir(), ".polar", "up.json");
}

export interface UpState {
  nats_url: string;
  api_url?: string;
  proxy_url?: string;
  sim_url?: string;
  pid: number;
}

export async function writeUpState(s: UpState): Promise<void> {
  await mkdir(dirname(upStatePath()), { recursive: true });
  await writeFile(upStatePath(), JSON.stringify(s, null, 2));
}

export async function clearUpState(): Promise<void> {
  await rm(upStatePath(), { force: true });
}

/**
 * --nats, then POLAR_NATS_URL, then the URL a running `polar up` wrote down.
 * Each may list several servers of one cluster, comma-separated.
 */
export async function resolveNatsUrl(flag?: string | readonly string[]): Promise<string> {
  if (flag?.length) return typeof flag === "string" ? flag : flag.join(",");
  if (process.env.POLAR_NATS_URL) return process.env.POLAR_NATS_URL;
  try {
    const s = JSON.parse(await readFile(upStatePath(), "utf8")) as UpState;
    if (s.nats_url && isAlive(s.pid)) return s.nats_url;
  } catch {
    // no state file
  }
  throw new PolarError("unavailable", "no NATS server known: pass --nats URL, set POLAR_NATS_URL, or start `polar up`");
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resolves on the first SIGINT/SIGTERM (the CLI entry owns signals, never library code). */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (s: NodeJS.Signals) => {
      process.off("SIGINT", on);
      process.off("SIGTERM", on);
      resolve(s);
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
}

export interface SignalSteps {
  /** The first SIGINT/SIGTERM: stop gracefully (drain). */
  first(signal: NodeJS.Signals): void;
  /** The second: stop now (cancel and requeue what is held). */
  second?(signal: NodeJS.Signals): void;
}

/**
 * Escalating signals for a long-running command: the first calls `first`,
 * the second `second`, a third exits at once (exit code 130). Returns a
 * disposer that removes the handlers.
 */
export function watchSignals(steps: SignalSteps): () => void {
  let count = 0;
  const on = (s: NodeJS.Signals) => {
    count++;
    if (count === 1) steps.first(s);
    else if (count === 2 && steps.second) steps.second(s);
    else {
      process.stderr.write(`polar: ${s} again: exiting now\n`);
      process.exit(130);
    }
  };
  process.on("SIGINT", on);
  process.on("SIGTERM", on);
  return () => {
    process.off("SIGINT", on);
    process.off("SIGTERM", on);
  };
}

/**
 * Once a command has stopped everything it started, the process must end:
 * if a stray handle (a socket, a reconnect timer) still holds the event
 * loop after `graceMs`, exit anyway. The timer itself never holds it.
 */
export function exitSoon(graceMs = 2000): void {
  setTimeout(() => process.exit(process.exitCode ?? 0), graceMs).unref();
}
