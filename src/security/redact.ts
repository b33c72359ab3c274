/**
 * Secret values this process knows (NATS passwords and tokens, API bearer
 * tokens, the values of `security.secret_env_names`), replaced by
 * `[redacted]` wherever text leaves the process: every log line (the logger's
 * last step) and the agent output a session keeps (step logs and the tails in
 * its result). Redaction is by value, so a secret printed by a program, echoed
 * in an error message or nested in any field is caught, in plain and in
 * JSON-escaped form.
 */

export const REDACTED = "[redacted]";

/** Shorter values are not redacted: they would hit ordinary text ("true", ports). */
export const MIN_SECRET_CHARS = 8;

const secrets = new Set<string>();
/** Longest first, so a secret containing another is replaced whole. */
let ordered: string[] = [];

/** Adds values to this process's secrets (empty and short values are ignored). */
export function registerSecret(...values: Array<string | undefined | null>): void {
  let added = false;
  for (const v of values) {
    if (typeof v !== "string" || v.length < MIN_SECRET_CHARS || secrets.has(v)) continue;
    secrets.add(v);
    const escaped = JSON.stringify(v).slice(1, -1);
    if (escaped !== v) secrets.add(escaped);
    added = true;
  }
  if (added) ordered = [...secrets].sort((a, b) => b.length - a.length);
}

/** The registered secrets count (for tests and diagnostics; never the values). */
export function secretCount(): number {
  return secrets.size;
}

/** `text` with every registered secret (and every extra one) replaced by `[redacted]`. */
export function redact(text: string, extra: readonly string[] = []): string {
  let out = text;
  for (const s of ordered) if (out.includes(s)) out = out.replaceAll(s, REDACTED);
  for (const s of extra) if (s.length >= MIN_SECRET_CHARS && out.includes(s)) out = out.replaceAll(s, REDACTED);
  return out;
}

/** Values of the named variables in `env` (names that are unset are reported, not invented). */
export function secretEnvFrom(names: readonly string[], env: NodeJS.ProcessEnv = process.env): { values: Record<string, string>; missing: string[] } {
  const values: Record<string, string> = {};
  const missing: string[] = [];
  for (const n of names) {
    const v = env[n];
    if (v === undefined || v === "") missing.push(n);
    else values[n] = v;
  }
  return { values, missing };
}
