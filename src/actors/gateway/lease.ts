/**
 * Session leases (bucket `polar_leases`): the compare-and-set record of which
 * attempt of a session holds it, so one session never runs twice at the same
 * time. A gateway takes the lease when it starts INIT of an attempt, renews it
 * while it holds the session, and lets it go when it hands the session back.
 *
 * Taking a lease:
 * - none (or deleted: its holder handed it back, or a node monitor expired a
 *   gone node's leases): created, this attempt holds it;
 * - held by a newer attempt: this attempt is stale and must not run;
 * - held by an older attempt: taken over when it was not renewed for
 *   `staleMs` (a live holder renews at every keep-alive) or `leftOver` says
 *   its holder is gone for sure (this very node, which runs no other attempt
 *   of it); otherwise the holder keeps it and the newcomer waits ("busy").
 *   A gone node's leases are normally deleted sooner by the supervisor's node
 *   monitor (missed heartbeats), which frees the session at once.
 * Silences are counted from the later of the holder's last sign of life and
 * this gateway's own last (re)connection (`calmSince`): after a NATS outage
 * that silenced everybody, a holder gets its full grace to renew before its
 * session may be taken.
 * A renewal that finds the lease gone, finished or held by another attempt
 * means this attempt lost it: it is cancelled and reports nothing.
 * A finished lease (the supervisor recorded the session's result) is never
 * taken: a delivery of a finished session is dropped, not run again.
 */
import { randomBytes } from "node:crypto";
import type { KV } from "@nats-io/kv";
import { decode, encode } from "../../protocol/codec.ts";
import { isWrongRevision } from "../../nats/retry.ts";
import { SessionLease } from "../../protocol/schemas.ts";
import { leaseKey } from "../../protocol/subjects.ts";
import { sha256Hex } from "../../security/result-auth.ts";

/** Session budgets beyond this are recorded as this (a Date cannot hold 1e308 s). */
const MAX_BUDGET_MS = 10 * 365 * 24 * 3600 * 1000;

export function newLeaseToken(): { token: string; sha256: string } {
  const token = randomBytes(24).toString("base64url");
  return { token, sha256: sha256Hex(token) };
}


export type Acquired =
  | { kind: "held"; lease: SessionLease; revision: number }
  /** A newer attempt holds the session: this one must not run. */
  | { kind: "superseded"; by: SessionLease }
  /** The supervisor recorded the session's result: nothing may run it again. */
  | { kind: "finished"; by: SessionLease }
  /** An older attempt that is still renewing holds it: try again later. */
  | { kind: "busy"; by: SessionLease };

export interface LeaseRequest {
  sessionId: string;
  taskId: string;
  attempt: number;
  nodeId: string;
  budgetSeconds: number;
  tokenSha256: string;
  ackSubject?: string;
  now: Date;
  /** This gateway's last (re)connection to NATS (ms since the epoch): silences before it say nothing. */
  calmSince: number;
}

export function leaseFor(r: LeaseRequest): SessionLease {
  const budgetMs = Math.min(MAX_BUDGET_MS, Math.max(0, r.budgetSeconds * 1000) || 0);
  return {
    session_id: r.sessionId,
    task_id: r.taskId,
    attempt: r.attempt,
    node_id: r.nodeId,
    init_at: r.now.toISOString(),
    deadline_at: new Date(r.now.getTime() + budgetMs).toISOString(),
    token_sha256: r.tokenSha256,
    updated_at: r.now.toISOString(),
    ...(r.ackSubject ? { ack_subject: r.ackSubject } : {}),
  };
}

/** The current lease, null when there is none; `lease` is null for an unreadable value (it holds nothing). */
export async function readLease(kv: KV, sessionId: string): Promise<{ lease: SessionLease | null; revision: number } | null> {
  const e = await kv.get(leaseKey(sessionId));
  if (!e || e.operation !== "PUT") return null;
  const parsed = SessionLease.safeParse(safeDecode(e.value));
  return { lease: parsed.success ? parsed.data : null, revision: e.revision };
}

function safeDecode(b: Uint8Array): unknown {
  try {
    return decode(b);
  } catch {
    return undefined; // not msgpack: an unreadable lease, replaced like a missing one
  }
}

/** Takes the lease for this attempt (see the module comment). KV errors other than a lost CAS are thrown (transient). */
export async function acquireLease(kv: KV, r: LeaseRequest, staleMs: number, leftOver: (l: SessionLease) => boolean): Promise<Acquired> {
  const key = leaseKey(r.sessionId);
  const mine = leaseFor(r);
  for (let i = 0; i < 8; i++) {
    const cur = await readLease(kv, r.sessionId);
    try {
      if (!cur) {
        return { kind: "held", lease: mine, revision: await kv.create(key, encode(mine)) };
      }
      const held = cur.lease;
      if (held?.finished_at) return { kind: "finished", by: held };
      if (!held) return { kind: "held", lease: mine, revision: await kv.update(key, encode(mine), cur.revision) };
      if (held.attempt > r.attempt) return { kind: "superseded", by: held };
      if (held.attempt === r.attempt && held.node_id === r.nodeId && held.token_sha256 === r.tokenSha256) {
        return { kind: "held", lease: held, revision: cur.revision };
      }
      const age = r.now.getTime() - Math.max(Date.parse(held.updated_at), r.calmSince);
      if (held.attempt === r.attempt || (!(age >= staleMs) && !leftOver(held))) return { kind: "busy", by: held };
      return { kind: "held", lease: mine, revision: await kv.update(key, encode(mine), cur.revision) };
    } catch (err) {
      if (!isWrongRevision(err)) throw err;
      // Someone wrote meanwhile: read again and decide again.
    }
  }
  const cur = await readLease(kv, r.sessionId);
  return { kind: "busy", by: cur?.lease ?? mine };
}

export type Renewal = { kind: "renewed"; revision: number } | { kind: "lost"; by: SessionLease | null };

/** Refreshes `updated_at` by compare-and-set; a lost CAS that finds another holder (or none) is "lost". */
export async function renewLease(kv: KV, lease: SessionLease, revision: number, now: Date): Promise<Renewal> {
  const key = leaseKey(lease.session_id);
  try {
    return { kind: "renewed", revision: await kv.update(key, encode({ ...lease, updated_at: now.toISOString() }), revision) };
  } catch (err) {
    if (!isWrongRevision(err)) throw err;
  }
  const cur = await readLease(kv, lease.session_id);
  if (cur?.lease && !cur.lease.finished_at && cur.lease.attempt === lease.attempt && cur.lease.token_sha256 === lease.token_sha256) {
    return { kind: "renewed", revision: cur.revision };
  }
  return { kind: "lost", by: cur?.lease ?? null };
}

/** Lets the lease go (only if this attempt still holds it), so the next attempt may take it at once. */
export async function releaseLease(kv: KV, lease: SessionLease): Promise<boolean> {
  const cur = await readLease(kv, lease.session_id);
  if (!cur?.lease || cur.lease.finished_at || cur.lease.attempt !== lease.attempt || cur.lease.token_sha256 !== lease.token_sha256) return false;
  try {
    await kv.delete(leaseKey(lease.session_id), { previousSeq: cur.revision });
    return true;
  } catch (err) {
    if (isWrongRevision(err)) return false;
    throw err;
  }
}

