/**
 * The gateway side of the proxy boundary: which credentials are live, and
 * where each session's captured completions go. Credentials are per attempt,
 * so a stale attempt's harness is refused once a newer one exists. State is
 * keyed by (session, attempt): a redelivered attempt arriving at a gateway that
 * still holds the older one never shares its records.
 */
import { randomBytes } from "node:crypto";
import type { CompletionRecord } from "../../protocol/schemas.ts";
import type { CaptureSink, ProxySession, SessionDirectory } from "../../proxy/types.ts";

interface Entry {
  session: ProxySession;
  records: CompletionRecord[];
  credential: string;
}

/** Finished sessions whose credentials still get 403 (not 401); the oldest are forgotten beyond this. */
const CLOSED_REMEMBERED = 10_000;

export class CaptureRegistry implements SessionDirectory, CaptureSink {
  readonly #byCredential = new Map<string, Entry>();
  readonly #byAttempt = new Map<string, Entry>();
  readonly #closed: string[] = [];

  /** Registers a session attempt (inactive until `activate`) and returns its credential. */
  open(session: Omit<ProxySession, "active">): string {
    const credential = `sk-polar-${randomBytes(18).toString("base64url")}`;
    const entry: Entry = { session: { ...session, active: false }, records: [], credential };
    this.#byCredential.set(credential, entry);
    this.#byAttempt.set(attemptKey(session.sessionId, session.attempt), entry);
    return credential;
  }

  setActive(sessionId: string, attempt: number, active: boolean): void {
    const e = this.#byAttempt.get(attemptKey(sessionId, attempt));
    if (e) e.session.active = active;
  }

  records(sessionId: string, attempt: number): CompletionRecord[] {
    return this.#byAttempt.get(attemptKey(sessionId, attempt))?.records ?? [];
  }

  /** Forgets the session; its credential then stays known but inactive (403, not 401). */
  close(sessionId: string, attempt: number): void {
    const key = attemptKey(sessionId, attempt);
    const e = this.#byAttempt.get(key);
    if (!e) return;
    e.session.active = false;
    e.records = [];
    this.#byAttempt.delete(key);
    this.#closed.push(e.credential);
    if (this.#closed.length > CLOSED_REMEMBERED) this.#byCredential.delete(this.#closed.shift()!);
  }

  lookup(credential: string): ProxySession | undefined {
    return this.#byCredential.get(credential)?.session;
  }

  async record(sessionId: string, record: CompletionRecord): Promise<void> {
    const e = typeof record.attempt === "number" ? this.#byAttempt.get(attemptKey(sessionId, record.attempt)) : undefined;
    if (!e || !e.session.active) throw new Error(`session ${sessionId} is not running`);
    e.records.push(record);
  }
}

function attemptKey(sessionId: string, attempt: number): string {
  return `${sessionId}\n${attempt}`;
}
