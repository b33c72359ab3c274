/**
 * Consumes SessionResults from POLAR_RESULTS: records each on its session's
 * entry, publishes its traces to POLAR_TRACES, then counts it in the task's
 * header and finishes the task when its last session is done (so anyone who
 * sees `completed` can read every trace). A message is acked only after all
 * of that is durable, so a supervisor that dies mid-way processes it again;
 * every step is idempotent. Transient NATS errors are retried (redelivery);
 * a result that still cannot be processed after RESULT_MAX_DELIVER deliveries
 * is replaced by an ERROR result for its session, logged, and dropped.
 */
import type { JsMsg } from "@nats-io/jetstream";
import type { Logger } from "pino";
import { readDurable, publishDurable } from "../../nats/messages.ts";
import { CONSUME_EXPIRES_MS, RESULT_MAX_DELIVER, type Infra } from "../../nats/infra.ts";
import { withRetry } from "../../nats/retry.ts";
import { decode, validate } from "../../protocol/codec.ts";
import { errorMessage, PolarError, ValidationError } from "../../protocol/errors.ts";
import { SessionResult, TERMINAL_STATUSES } from "../../protocol/schemas.ts";
import { leaseKey, STREAMS, SUBJECTS, RESULTS_CONSUMER } from "../../protocol/subjects.ts";
import { emptySession, parseSessionId, type SessionEntry, type TaskHeader, type TaskStore } from "./task-store.ts";
import { cancelSessions } from "./tasks.ts";
import { verifyResultSource } from "../../security/result-auth.ts";
import { markLeaseFinished } from "./finished-leases.ts";

export interface ResultsDeps {
  infra: Infra;
  store: TaskStore;
  log: Logger;
  onTaskDone: (h: TaskHeader) => void;
  emit: (kind: "task.updated" | "task.done", body: unknown) => void;
  /** Refuse gateway results for sessions without a lease (default true; see security/result-auth.ts). */
  requireLease?: boolean;
  /** Deliveries of one result before it is given up on (the consumer's max_deliver). */
  maxDeliver?: number;
  /** First redelivery delay after a failure; doubles each time (capped at 30 s). */
  retryBaseMs?: number;
  /** Counts results given up on after their last delivery. */
  stats?: { unprocessable_results: number };
}

export async function consumeResults(d: ResultsDeps, signal: AbortSignal): Promise<void> {
  const maxDeliver = d.maxDeliver ?? RESULT_MAX_DELIVER;
  const retryMs = d.retryBaseMs ?? 250;
  const consumer = await d.infra.js.consumers.get(STREAMS.results, RESULTS_CONSUMER);
  const messages = await consumer.consume({ max_messages: 64, expires: CONSUME_EXPIRES_MS });
  signal.addEventListener("abort", () => void messages.close(), { once: true });
  for await (const m of messages) {
    try {
      await handleResult(d, m);
      m.ack();
    } catch (err) {
      if (m.info.deliveryCount >= maxDeliver) {
        await giveUp(d, m, err).catch((e) => d.log.error({ err: errorMessage(e), seq: m.seq }, "could not record an unprocessable result"));
        m.term(`unprocessable after ${m.info.deliveryCount} deliveries`);
      } else {
        d.log.error({ err: errorMessage(err), seq: m.seq, delivery: m.info.deliveryCount }, "could not process a session result; it will be redelivered");
        m.nak(Math.min(30_000, retryMs * 2 ** (m.info.deliveryCount - 1)));
      }
    }
  }
}

/**
 * The last delivery of a result failed: its session is recorded as ERROR
 * (overwriting whatever its entry held) naming why, so the task still ends
 * and the loss is visible in its status.
 */
async function giveUp(d: ResultsDeps, m: JsMsg, err: unknown): Promise<void> {
  if (d.stats) d.stats.unprocessable_results++;
  const ids = peekIds(m);
  d.log.error({ err: errorMessage(err), seq: m.seq, ...ids }, "giving up on a session result after its last delivery");
  const where = ids && (await locate(d, ids.task_id, ids.session_id));
  if (!where) return;
  const error = `the session's result could not be recorded after ${m.info.deliveryCount} deliveries: ${errorMessage(err).slice(0, 500)}`;
  const entry: SessionEntry = {
    ...emptySession(where.run, where.index),
    status: "ERROR",
    attempt: ids!.attempt,
    error,
    result_seq: m.seq,
    counted: false,
  };
  await d.store.putSession(ids!.task_id, where.run, where.index, entry);
  await count(d, where.h, where.index, entry, m.seq);
}

/** Task and session id of a result whose processing failed (read from the raw body, best effort). */
function peekIds(m: JsMsg): { task_id: string; session_id: string; attempt: number } | undefined {
  try {
    const v = decode(m.data) as { task_id?: unknown; session_id?: unknown; attempt?: unknown } | undefined;
    if (typeof v?.task_id !== "string" || typeof v.session_id !== "string") return undefined;
    return { task_id: v.task_id, session_id: v.session_id, attempt: typeof v.attempt === "number" ? v.attempt : 1 };
  } catch (e) {
    if (e instanceof ValidationError) return undefined; // not even decodable: nothing to attribute it to
    throw e;
  }
}

/** The current run's header and the session's index, or undefined for an unknown task or session. */
async function locate(d: ResultsDeps, taskId: string, sessionId: string): Promise<{ h: TaskHeader; run: string; index: number } | undefined> {
  const ids = parseSessionId(sessionId);
  const h = await d.store.get(taskId);
  if (!h || !ids || ids.run !== h.run || ids.index >= h.total) {
    d.log.warn({ task_id: taskId, session_id: sessionId }, "result for an unknown task or session");
    return undefined;
  }
  return { h, run: ids.run, index: ids.index };
}

async function readResult(d: ResultsDeps, m: JsMsg): Promise<SessionResult | undefined> {
  try {
    return validate(SessionResult, await readDurable(d.infra, m.data, m.headers), "session result");
  } catch (err) {
    // Malformed bytes or a blob that is gone can never become valid: log and drop.
    // Anything else (a NATS or object-store hiccup) is thrown, and the message redelivered.
    if (err instanceof ValidationError || (err instanceof PolarError && err.code === "not_found")) {
      d.log.error({ err: errorMessage(err), seq: m.seq }, "dropping a malformed session result");
      return undefined;
    }
    throw err;
  }
}

async function handleResult(d: ResultsDeps, m: JsMsg): Promise<void> {
  const result = await readResult(d, m);
  if (!result) return;
  if (!(await authentic(d, m, result))) return;
  const where = await locate(d, result.task_id, result.session_id);
  if (!where) return;
  const { run, index } = where;
  let fresh = false;
  const s = await d.store.updateSession(result.task_id, run, index, (e) => {
    if (e.result_seq === m.seq) return false; // a redelivery of the result already recorded
    if (TERMINAL_STATUSES.has(e.status)) return false; // another attempt's result was recorded first
    Object.assign(e, summarize(result), { result_seq: m.seq, counted: false });
    fresh = true;
    return true;
  });
  if (s?.result_seq !== m.seq) {
    d.log.info({ session_id: result.session_id, attempt: result.attempt }, "ignoring a duplicate session result");
    return;
  }
  await publishTraces(d, result);
  const h = await count(d, where.h, index, s, m.seq);
  if (h && fresh) d.emit("task.updated", { task_id: result.task_id, session_id: result.session_id, status: result.status });
}

/**
 * Counts a recorded session in its task's header (once: the entry's
 * `counted` flag), finishes the task when it was the last, marks the
 * session's lease finished (so no redelivered attempt runs it again), applies early stop, and hands a final task to onTaskDone.
 */
async function count(d: ResultsDeps, h0: TaskHeader, index: number, s: SessionEntry, seq: number): Promise<TaskHeader | undefined> {
  const taskId = h0.request.task_id;
  let h: TaskHeader | undefined = h0;
  if (!s.counted) {
    h = await d.store.updateHeader(taskId, (x) => {
      if (x.run !== h0.run) return false;
      x.counts.done++;
      x.counts.by_status[s.status] = (x.counts.by_status[s.status] ?? 0) + 1;
      if (s.usable) x.counts.usable++;
      return true;
    });
    if (h && h.counts.done >= h.total && (h.status === "running" || h.status === "cancelling")) h = await finishIfDone(d, h);
    await d.store.updateSession(taskId, h0.run, index, (e) => {
      if (e.counted || e.result_seq !== seq) return false;
      e.counted = true;
      return true;
    });
  }
  await withRetry(() => markLeaseFinished(d.infra.leases, s.session_id, taskId, s.attempt), { log: d.log, what: "lease finish" });
  if (!h) return undefined;
  await maybeEarlyStop(d, h);
  if ((h.status === "completed" || h.status === "cancelled") && h.callback == null) d.onTaskDone(h);
  return h;
}

/**
 * The counters say every session is done: confirm it from the session
 * entries (the counters can run ahead after a crash between two writes, or a
 * write applied whose answer was lost) and mark the task final, with exact
 * counts. The ordered read of the entries can lag the latest writes (on a
 * cluster it may be served by a replica that has not applied them yet), so a
 * session it shows unfinished is read again from the stream's leader before
 * the counts are lowered: a lagging read once left a task `running` with all
 * its sessions recorded.
 */
async function finishIfDone(d: ResultsDeps, h: TaskHeader): Promise<TaskHeader | undefined> {
  const counts = { done: 0, usable: 0, by_status: {} as Record<string, number> };
  const add = (s: SessionEntry) => {
    counts.done++;
    counts.by_status[s.status] = (counts.by_status[s.status] ?? 0) + 1;
    if (s.usable) counts.usable++;
  };
  const finished = new Set<number>();
  for await (const s of d.store.sessions(h)) {
    if (!TERMINAL_STATUSES.has(s.status) || finished.has(s.sample_index)) continue;
    finished.add(s.sample_index);
    add(s);
  }
  let lagged = 0;
  for (let i = 0; i < h.total; i++) {
    if (finished.has(i)) continue;
    const s = await d.store.getSessionLatest(h.request.task_id, h.run, i);
    if (!s || !TERMINAL_STATUSES.has(s.status)) continue;
    add(s);
    lagged++;
  }
  if (lagged > 0) d.log.warn({ task_id: h.request.task_id, sessions: lagged }, "the read of the task's sessions lagged; finished sessions were read again from the leader");
  return d.store.updateHeader(h.request.task_id, (x) => {
    if (x.run !== h.run || !(x.status === "running" || x.status === "cancelling")) return false;
    x.counts = counts;
    if (counts.done >= x.total) {
      x.status = x.status === "cancelling" ? "cancelled" : "completed";
      x.finished_at = new Date().toISOString();
    }
    return true;
  });
}

/**
 * Only a result from the attempt's lease holder (or the supervisor itself)
 * changes state; a redelivery of one already recorded passes (its lease may be gone).
 */
async function authentic(d: ResultsDeps, m: JsMsg, result: SessionResult): Promise<boolean> {
  const verdict = await verifyResultSource(d.infra.leases, m.subject, result, { requireLease: d.requireLease ?? true });
  if (verdict.ok) return true;
  const h = await d.store.get(result.task_id);
  const ids = parseSessionId(result.session_id);
  const recorded = h && ids && ids.run === h.run ? (await d.store.getSession(result.task_id, ids.run, ids.index))?.entry : undefined;
  if (recorded?.result_seq === m.seq) return true;
  d.log.warn({ task_id: result.task_id, session_id: result.session_id, node_id: result.node_id, seq: m.seq, reason: verdict.reason }, "refusing a session result that does not come from the attempt's lease holder");
  return false;
}

async function publishTraces(d: ResultsDeps, r: SessionResult): Promise<void> {
  const subject = SUBJECTS.trace(r.task_id, r.session_id);
  for (const [i, trace] of r.trajectory.traces.entries()) {
    const body = {
      task_id: r.task_id,
      session_id: r.session_id,
      trace_index: i,
      trace_count: r.trajectory.traces.length,
      status: r.status,
      attempt: r.attempt,
      trace,
    };
    await withRetry(() => publishDurable(d.infra, subject, body, `${r.session_id}:${r.attempt}:${i}`), { log: d.log, what: "trace publish" });
  }
}

/**
 * Once `early_stop_min_usable_sessions` sessions are usable, the stragglers
 * are cancelled: they report ERROR with zero reward and zeroed masks.
 */
async function maybeEarlyStop(d: ResultsDeps, h: TaskHeader): Promise<void> {
  const min = h.request.early_stop_min_usable_sessions;
  if (!min || h.status !== "running" || h.early_stopped_at) return;
  const usable = h.counts.usable;
  if (usable < min || h.counts.done >= h.total) return;
  const reason = `early stop: ${usable} usable sessions reached the minimum of ${min}`;
  const updated = await d.store.updateHeader(h.request.task_id, (r) => {
    if (r.early_stopped_at || r.run !== h.run) return false;
    r.early_stopped_at = new Date().toISOString();
    return true;
  });
  if (!updated?.early_stopped_at) return;
  d.log.info({ task_id: h.request.task_id, usable, min }, "early stop: cancelling the remaining sessions");
  await cancelSessions(d.infra, d.store, updated, reason);
}

function summarize(r: SessionResult) {
  const traces = r.trajectory.traces;
  const rewards = traces.map((t) => t.reward).filter((x): x is number => typeof x === "number");
  return {
    status: r.status,
    attempt: r.attempt,
    node_id: r.node_id,
    reward: rewards.length ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null,
    trace_count: traces.length,
    prompt_tokens: traces.reduce((a, t) => a + t.prompt_ids.length, 0),
    response_tokens: traces.reduce((a, t) => a + t.response_ids.length, 0),
    // The summary stays small whatever the result says; the full error is in the SessionResult.
    error: r.error == null ? null : r.error.length > 2000 ? `${r.error.slice(0, 2000)}…` : r.error,
    usable:
      r.status === "COMPLETED" &&
      traces.some((t) => t.prompt_ids.length > 0 && t.response_ids.length > 0 && t.loss_mask.includes(1)),
  };
}
