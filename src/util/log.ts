/**
 * The one pino root; actors and sessions take child loggers. The session
 * credential is redacted, and so is every registered secret value
 * (src/security/redact.ts) anywhere in a line. On a terminal the lines are human-readable (pino-pretty,
 * written synchronously in-process); elsewhere, or with `json`, one JSON object
 * a line.
 */
import { pino, type Logger } from "pino";
import pretty from "pino-pretty";
import { redact } from "../security/redact.ts";

export type { Logger };

/** `auto`: readable on a TTY, JSON otherwise (`POLAR_LOG_FORMAT` sets the default). */
export type LogFormat = "auto" | "pretty" | "json";

export interface LoggerOptions {
  level?: string;
  name?: string;
  destination?: NodeJS.WritableStream;
  format?: LogFormat;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const level = opts.level ?? process.env.POLAR_LOG_LEVEL ?? "info";
  const dest = opts.destination ?? process.stderr;
  const options = {
    name: opts.name ?? "polar",
    level,
    redact: { paths: ["credential", "*.credential", "headers.authorization", "headers['x-api-key']", "headers['x-goog-api-key']"], censor: "[redacted]" },
    // Secret values (NATS passwords, API tokens, secret env values) wherever they appear in a line.
    hooks: { streamWrite: (line: string) => redact(line) },
  };
  if (logFormat(opts.format, dest) === "json") return pino(options, dest as pino.DestinationStream);
  const stream = pretty({
    destination: dest,
    sync: true,
    colorize: (dest as { isTTY?: boolean }).isTTY === true,
    translateTime: "SYS:HH:MM:ss.l",
    ignore: "pid,hostname,name",
    singleLine: true,
  });
  return pino(options, stream);
}

export function logFormat(format: LogFormat | undefined, dest: NodeJS.WritableStream = process.stderr): "pretty" | "json" {
  const f = format ?? (process.env.POLAR_LOG_FORMAT as LogFormat | undefined) ?? "auto";
  if (f === "json" || f === "pretty") return f;
  return (dest as { isTTY?: boolean }).isTTY ? "pretty" : "json";
}

/** A logger that drops everything (tests, benchmarks). */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

const said = new Set<string>();

/**
 * Logs a warning once per process for `key` (a condition that would repeat for
 * every session), with what to do about it.
 */
export function warnOnce(log: Logger, key: string, msg: string, remedy: string, fields: Record<string, unknown> = {}): void {
  if (said.has(key)) return;
  said.add(key);
  log.warn({ ...fields, remedy }, msg);
}
