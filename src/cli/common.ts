/** Shared pieces of the CLI commands: where NATS is, the state file of `polar up`, shutdown. */
import { findUpInstance } from "./up-state.ts";
import { PolarError } from "../protocol/errors.ts";
import { natsAuthFromEnv, type NatsAuth } from "../security/nats-auth.ts";
import type { Role } from "../security/nats-roles.ts";

export { clearUpState, upStatePath, writeUpState, type UpState } from "./up-state.ts";

/**
 * --nats, then POLAR_NATS_URL, then the URL a running `polar up` wrote down.
 * Each may list several servers of one cluster, comma-separated.
 */
export async function resolveNatsUrl(flag?: string | readonly string[]): Promise<string> {
  if (flag?.length) return typeof flag === "string" ? flag : flag.join(",");
  if (process.env.POLAR_NATS_URL) return process.env.POLAR_NATS_URL;
  const found = await findUpInstance();
  if (found) {
    const more = found.live > 1 ? `; ${found.live} instances are running, pass --nats to choose` : "";
    process.stderr.write(`polar: using NATS ${found.state.nats_url} of the polar up started by pid ${found.state.pid}${more}\n`);
    return found.state.nats_url;
  }
  throw new PolarError("unavailable", "no NATS server known: pass --nats URL, set POLAR_NATS_URL, or start `polar up`");
}

/**
 * Credentials for a CLI command: POLAR_NATS_* from the environment, else the
 * ones a running `polar up` on this host wrote down for its own server.
 */
export async function resolveNatsAuth(url: string, role: Role = "trainer"): Promise<NatsAuth | undefined> {
  const env = natsAuthFromEnv();
  if (env) return env;
  const found = await findUpInstance();
  return found && found.state.nats_url === url ? found.state.nats_credentials?.[role] : undefined;
}

/** `--creds FILE`: a `.creds` file (user JWT and NKey seed) replaces other credentials; TLS settings stay. */
export function withCreds(auth: NatsAuth | undefined, creds: string | undefined): NatsAuth | undefined {
  if (!creds) return auth;
  const { tls_ca_file, tls_cert_file, tls_key_file } = auth ?? {};
  return { creds_file: creds, tls_ca_file, tls_cert_file, tls_key_file };
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
