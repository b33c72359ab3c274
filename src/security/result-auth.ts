/**
 * Whether a SessionResult comes from whoever may report it. A gateway's
 * result counts only when the node holds the attempt: the session's lease
 * names that node and attempt, and the result carries the lease token whose
 * sha256 the lease stores (only the holding gateway knows the token). The
 * supervisor's own results (overdue sessions, dead letters) travel on a
 * subject only the supervisor role may publish on. Everything else is refused
 * before it changes any state.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { KV } from "@nats-io/kv";
import { decode } from "../protocol/codec.ts";
import { SessionLease, type SessionResult } from "../protocol/schemas.ts";
import { leaseKey, SUBJECTS } from "../protocol/subjects.ts";

export type ResultVerdict = { ok: true; via: "supervisor" | "lease" | "unleased" } | { ok: false; reason: string };

export function sha256Hex(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

export interface ResultAuthOptions {
  /** Refuse gateway results for sessions that have no lease (every gateway takes one before it runs an attempt). */
  requireLease: boolean;
}

export async function verifyResultSource(leases: KV, subject: string, r: SessionResult, opts: ResultAuthOptions): Promise<ResultVerdict> {
  let own: string;
  let supervisor: string;
  try {
    own = SUBJECTS.result(r.task_id);
    supervisor = SUBJECTS.supervisorResult(r.task_id);
  } catch (err) {
    return { ok: false, reason: `task id is not valid: ${(err as Error).message}` };
  }
  if (subject === supervisor) return { ok: true, via: "supervisor" };
  if (subject !== own) return { ok: false, reason: `published on ${subject}, not on the result subject of task ${r.task_id}` };
  let key: string;
  try {
    key = leaseKey(r.session_id);
  } catch (err) {
    return { ok: false, reason: `session id is not valid: ${(err as Error).message}` };
  }
  const entry = await leases.get(key);
  if (!entry || entry.operation !== "PUT" || !entry.value.length) {
    return opts.requireLease ? { ok: false, reason: "no lease is held for this session" } : { ok: true, via: "unleased" };
  }
  const parsed = SessionLease.safeParse(decode(entry.value));
  if (!parsed.success) return { ok: false, reason: "the session's lease is malformed" };
  const lease = parsed.data;
  if (lease.finished_at) return { ok: false, reason: "the session's result is already recorded" };
  if (lease.task_id !== r.task_id) return { ok: false, reason: `the lease belongs to task ${lease.task_id}` };
  if (lease.attempt !== r.attempt) return { ok: false, reason: `attempt ${r.attempt} does not hold the lease (attempt ${lease.attempt} does)` };
  if (lease.node_id !== r.node_id) return { ok: false, reason: `node ${r.node_id ?? "(none)"} does not hold the lease (node ${lease.node_id} does)` };
  if (!r.lease_token) return { ok: false, reason: "the result carries no lease token" };
  const got = Buffer.from(sha256Hex(r.lease_token), "hex");
  const want = Buffer.from(lease.token_sha256, "hex");
  if (got.length !== want.length || !timingSafeEqual(got, want)) return { ok: false, reason: "the lease token does not match the lease" };
  return { ok: true, via: "lease" };
}
