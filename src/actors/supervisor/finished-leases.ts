/**
 * Once the supervisor has recorded a session's terminal result, the session's
 * lease is not deleted but marked finished (`finished_at`). A delivery of the
 * session that JetStream redelivers anyway (its ack was lost in an outage, or
 * raced the result) then finds the session done and is dropped instead of
 * running the agent again; the holder's next renewal fails, so an attempt the
 * supervisor timed out is cancelled as before. The marker is kept at least
 * FINISHED_LEASE_KEEP_MS (the sweep removes it after its deadline plus grace).
 */
import type { KV } from "@nats-io/kv";
import { decode, encode } from "../../protocol/codec.ts";
import { isWrongRevision } from "../../nats/retry.ts";
import { SessionLease } from "../../protocol/schemas.ts";
import { leaseKey } from "../../protocol/subjects.ts";

/** How long a finished marker outlives its session at least (redeliveries come within ack_wait of an outage's end). */
export const FINISHED_LEASE_KEEP_MS = 10 * 60_000;

/** Node id written on a marker for a session no gateway leased (results the supervisor recorded itself). */
const NO_HOLDER = "supervisor";

export async function markLeaseFinished(kv: KV, sessionId: string, taskId: string, attempt: number, now = new Date()): Promise<void> {
  const key = leaseKey(sessionId);
  const at = now.toISOString();
  const keepUntil = new Date(now.getTime() + FINISHED_LEASE_KEEP_MS).toISOString();
  for (let i = 0; i < 8; i++) {
    const e = await kv.get(key);
    const live = e?.operation === "PUT" && e.value.length > 0;
    const parsed = live ? SessionLease.safeParse(safeDecode(e.value)) : undefined;
    if (parsed?.success && parsed.data.finished_at) return;
    const base: SessionLease = parsed?.success
      ? parsed.data
      : { session_id: sessionId, task_id: taskId, attempt: Math.max(0, attempt), node_id: NO_HOLDER, init_at: at, deadline_at: at, token_sha256: "0".repeat(64), updated_at: at };
    const marker: SessionLease = {
      ...base,
      updated_at: at,
      finished_at: at,
      deadline_at: Date.parse(base.deadline_at) > Date.parse(keepUntil) ? base.deadline_at : keepUntil,
    };
    try {
      if (e && live) await kv.update(key, encode(marker), e.revision);
      else await kv.create(key, encode(marker));
      return;
    } catch (err) {
      if (!isWrongRevision(err)) throw err;
      // A gateway renewed or took it meanwhile: read again.
    }
  }
  throw new Error(`could not mark the lease of ${sessionId} finished: it kept changing`);
}

function safeDecode(b: Uint8Array): unknown {
  try {
    return decode(b);
  } catch {
    return undefined; // an unreadable lease is replaced by the marker
  }
}
