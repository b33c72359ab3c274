/** The one pino root; actors and sessions take child loggers. The session credential is redacted. */
import { pino, type Logger } from "pino";

export type { Logger };

export function createLogger(opts: { level?: string; name?: string; destination?: NodeJS.WritableStream } = {}): Logger {
  const level = opts.level ?? process.env.POLAR_LOG_LEVEL ?? "info";
  return pino(
    {
      name: opts.name ?? "polar",
      level,
      redact: { paths: ["credential", "*.credential", "headers.authorization", "headers['x-api-key']", "headers['x-goog-api-key']"], censor: "[redacted]" },
    },
    (opts.destination ?? process.stderr) as pino.DestinationStream,
  );
}

/** A logger that drops everything (tests, benchmarks). */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
