/**
 * The gateway side of the proxy boundary: which credentials are live, and
 * where each session's captured completions go. Credentials are per attempt,
 * so a stale attempt's harness is refused once a newer one exists.
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
  readonly #bySession = new Map<string, Entry>();
  readonly #closed: string[] = [];

  /** Registers a session attempt (inactive until `activate`) and returns its credential. */
  open(session: Omit<ProxySession, "active">): string {
    const credential = `sk-polar-${randomBytes(18).toString("base64url")}`;
    const entry: Entry = { session: { ...session, active: false }, records: [], credential };
    this.#byCredential.set(credential, entry);
    this.#bySession.set(session.sessionId, entry);
    return credential;
  }

  setActive(sessionId: string, active: boolean): void {
    const e = this.#bySession.get(sessionId);
    if (e) e.session.active = active;
  }

  records(sessionId: string): CompletionRecord[] {
    return this.#bySession.get(sessionId)?.records ?? [];
  }

  /** Forgets the session; its credential then stays known but inactive (403, not 401). */
  close(sessionId: string): void {
    const e = this.#bySession.get(sessionId);
    if (!e) return;
    e.session.active = false;
    e.records = [];
    this.#bySession.delete(sessionId);
    this.#closed.push(e.credential);
    if (this.#closed.length > CLOSED_REMEMBERED) this.#byCredential.delete(this.#closed.shift()!);
  }

  lookup(credential: string): ProxySession | undefined {
    return this.#byCredential.get(credential)?.session;
  }

  async record(sessionId: string, record: CompletionRecord): Promise<void> {
    const e = this.#bySession.get(sessionId);
    if (!e || !e.session.active) throw new Error(`session ${sessionId} is not running`);
    e.records.push(record);
  }
}
