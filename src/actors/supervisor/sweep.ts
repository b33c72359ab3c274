/**
 * The overdue sweep and start-up recovery. Both walk only what is live: the
 * session leases (sessions a gateway has started) and the live-task index,
 * never every task ever stored. One unreadable record is logged, counted and
 * skipped; it never stops the walk.
 *
 * Budgets are counted as the reference counts them: a session's deadline is
 * its lease's `deadline_at` (INIT start + budget, written by the gateway), so
 * a session still queued is never given TIMEOUT by its budget; only the
 * optional `queue_timeout_seconds` bounds how long it may wait.
 */
import { kvKeys } from "../../nats/kv-keys.ts";
import type { Logger } from "pino";
import { publishDurable } from "../../nats/messages.ts";
import type { Infra } from "../../nats/infra.ts";
import { withRetry } from "../../nats/retry.ts";
import { decode } from "../../protocol/codec.ts";
import { errorMessage } from "../../protocol/errors.ts";
import { emptyTiming, SessionLease, TERMINAL_STATUSES, type SessionResult } from "../../protocol/schemas.ts";
import { leaseKey, SUBJECTS } from "../../protocol/subjects.ts";
import { parseSessionId, type TaskHeader, type TaskStore } from "./task-store.ts";
import type { LiveState, TaskService } from "./tasks.ts";

export interface SweepContext {
  infra: Infra;
  store: TaskStore;
  log: Logger;
  /** Extra time past a lease's deadline before the supervisor gives up on the gateway. */
  graceMs: number;
  live: Map<string, LiveState>;
  /** Records the sweep could not read or act on (logged each time). */
  stats: { sweep_errors: number };
  now?: () => number;
}

export async function sweep(c: SweepContext): Promise<void> {
  await sweepLeases(c);
  await sweepQueued(c);
}

/** Sessions whose lease deadline (plus grace) passed without a result: TIMEOUT. */
async function sweepLeases(c: SweepContext): Promise<void> {
  const now = (c.now ?? Date.now)();
  const keys = await withRetry(() => kvKeys(c.infra.leases), { log: c.log });
  for (const key of keys) {
    try {
      const e = await withRetry(() => c.infra.leases.get(key), { log: c.log });
      if (!e || e.operation !== "PUT" || !e.value?.length) continue;
      const lease = SessionLease.parse(decode(e.value));
      if (now < Date.parse(lease.deadline_at) + c.graceMs) continue;
      const ids = parseSessionId(lease.session_id);
      const h = await c.store.get(lease.task_id);
      const s = h && ids && ids.run === h.run ? await c.store.getSession(h.request.task_id, ids.run, ids.index) : undefined;
      if (!h || !s || TERMINAL_STATUSES.has(s.entry.status)) {
        await c.infra.leases.delete(key); // its session is finished or gone: the lease is stale
        continue;
      }
      const why = `no session result within the session budget (deadline ${lease.deadline_at}, attempt ${lease.attempt} on ${lease.node_id})`;
      c.log.warn({ task_id: lease.task_id, session_id: lease.session_id, attempt: lease.attempt }, "session overdue: recording TIMEOUT");
      await timeout(c, h, lease.session_id, lease.attempt, why, `${lease.session_id}:${lease.attempt}:overdue`);
    } catch (err) {
      c.stats.sweep_errors++;
      c.log.error({ key, err: errorMessage(err) }, "sweep: unreadable lease skipped");
    }
  }
}

/**
 * How long past a queue deadline the sweep waits before it records TIMEOUT:
 * a gateway refuses a session pulled after the deadline, so this only covers
 * one pulled just before it whose lease is not written yet.
 */
export const QUEUE_GRACE_MS = 3000;

/** Tasks with `queue_timeout_seconds`: sessions no gateway started in time get TIMEOUT. */
async function sweepQueued(c: SweepContext): Promise<void> {
  const now = (c.now ?? Date.now)();
  for (const taskId of await c.store.liveTaskIds()) {
    try {
      const h = await c.store.get(taskId);
      if (!h || (h.status !== "running" && h.status !== "cancelling")) continue;
      const q = h.request.queue_timeout_seconds;
      if (q == null || now < Date.parse(h.created_at) + q * 1000 + QUEUE_GRACE_MS) continue;
      for await (const s of c.store.sessions(h)) {
        if (TERMINAL_STATUSES.has(s.status) || c.live.has(s.session_id)) continue;
        const lease = await withRetry(() => c.infra.leases.get(leaseKey(s.session_id)), { log: c.log });
        if (lease?.operation === "PUT") continue; // started: its budget governs now
        const why = `no gateway started the session within queue_timeout_seconds (${q} s)`;
        await timeout(c, h, s.session_id, Math.max(1, s.attempt), why, `${s.session_id}:queue-timeout`);
      }
    } catch (err) {
      c.stats.sweep_errors++;
      c.log.error({ task_id: taskId, err: errorMessage(err) }, "sweep: unreadable task skipped");
    }
  }
}

async function timeout(c: SweepContext, h: TaskHeader, sessionId: string, attempt: number, error: string, msgId: string): Promise<void> {
  const result: SessionResult = {
    session_id: sessionId,
    task_id: h.request.task_id,
    status: "TIMEOUT",
    trajectory: { status: "TIMEOUT", metadata: {}, traces: [], error },
    timing: emptyTiming(),
    node_id: null,
    error,
    metadata: h.request.metadata,
    attempt,
  };
  await withRetry(() => publishDurable(c.infra, SUBJECTS.supervisorResult(h.request.task_id), result, msgId), { log: c.log });
}

/** After a restart: finish dispatching interrupted submits and deliver missed callbacks (live tasks only). */
export async function recover(
  tasks: TaskService,
  c: Pick<SweepContext, "store" | "log" | "stats">,
  onTaskDone: (h: TaskHeader) => void,
): Promise<void> {
  for (const taskId of await c.store.liveTaskIds()) {
    try {
      const h = await c.store.get(taskId);
      if (!h) {
        await c.store.removeLive(taskId);
      } else if (h.status === "running" && !h.dispatched) {
        c.log.info({ task_id: taskId }, "re-dispatching an interrupted submit");
        const done = new Set<number>();
        for await (const s of c.store.sessions(h)) if (TERMINAL_STATUSES.has(s.status)) done.add(s.sample_index);
        await tasks.dispatch(h, done);
      } else if (h.status === "completed" || h.status === "cancelled" || h.status === "failed") {
        if (h.callback == null) onTaskDone(h);
        else await c.store.removeLive(taskId);
      }
    } catch (err) {
      c.stats.sweep_errors++;
      c.log.error({ err: errorMessage(err), task_id: taskId }, "recovery of a task failed");
    }
  }
}
