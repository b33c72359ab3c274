/**
 * Consumes SessionResults from POLAR_RESULTS: records each in the task's
 * durable state, publishes its traces to POLAR_TRACES, and finishes the task
 * (TaskResult callback) when its last session is done. A message is acked
 * only after all of that is durable, so a supervisor that dies mid-way
 * processes it again; every step is idempotent.
 */
import type { JsMsg } from "@nats-io/jetstream";
import type { Logger } from "pino";
import { readDurable, publishDurable } from "../../nats/messages.ts";
import type { Infra } from "../../nats/infra.ts";
import { validate } from "../../protocol/codec.ts";
import { errorMessage } from "../../protocol/errors.ts";
import { SessionResult, TERMINAL_STATUSES } from "../../protocol/schemas.ts";
import { STREAMS, SUBJECTS, RESULTS_CONSUMER } from "../../protocol/subjects.ts";
import { allDone, type TaskRecord, type TaskStore } from "./task-store.ts";
import { cancelSessions } from "./tasks.ts";
import { verifyResultSource } from "../../security/result-auth.ts";

export interface ResultsDeps {
  infra: Infra;
  store: TaskStore;
  log: Logger;
  onTaskDone: (rec: TaskRecord) => Promise<void>;
  emit: (kind: "task.updated" | "task.done", body: unknown) => void;
  /** Refuse gateway results for sessions without a lease (see security/result-auth.ts). */
  requireLease?: boolean;
}

export async function consumeResults(d: ResultsDeps, signal: AbortSignal): Promise<void> {
  const consumer = await d.infra.js.consumers.get(STREAMS.results, RESULTS_CONSUMER);
  const messages = await consumer.consume({ max_messages: 64 });
  signal.addEventListener("abort", () => void messages.close(), { once: true });
  for await (const m of messages) {
    try {
      await handleResult(d, m);
      m.ack();
    } catch (err) {
      d.log.error({ err, seq: m.seq }, "could not process a session result; it will be redelivered");
      m.nak(1000);
    }
  }
}

async function handleResult(d: ResultsDeps, m: JsMsg): Promise<void> {
  let result: SessionResult;
  try {
    result = validate(SessionResult, await readDurable(d.infra, m.data, m.headers), "session result");
  } catch (err) {
    // A malformed result can never become valid: count it and drop it.
    d.log.error({ err: errorMessage(err), seq: m.seq }, "dropping a malformed session result");
    return;
  }
  if (!(await authentic(d, m, result))) return;
  let accepted = false;
  const rec = await d.store.update(result.task_id, (r) => {
    const s = r.sessions.find((x) => x.session_id === result.session_id);
    if (!s) return false;
    if (TERMINAL_STATUSES.has(s.status) && s.result_seq !== m.seq) return false; // a later attempt's duplicate
    accepted = s.result_seq !== m.seq;
    Object.assign(s, summarize(result), { result_seq: m.seq });
    if (allDone(r) && (r.status === "running" || r.status === "cancelling")) {
      r.status = r.status === "cancelling" ? "cancelled" : "completed";
      r.finished_at = new Date().toISOString();
    }
    return true;
  });
  if (!rec) {
    d.log.warn({ task_id: result.task_id, session_id: result.session_id }, "result for an unknown task or session");
    return;
  }
  const summary = rec.sessions.find((x) => x.session_id === result.session_id);
  if (summary?.result_seq !== m.seq) {
    d.log.info({ session_id: result.session_id, attempt: result.attempt }, "ignoring a duplicate session result");
    return;
  }
  await publishTraces(d, result);
  if (accepted) d.emit("task.updated", { task_id: rec.request.task_id, session_id: result.session_id, status: result.status });
  await maybeEarlyStop(d, rec);
  if (allDone(rec) && rec.callback == null) await d.onTaskDone(rec);
}

/**
 * Only a result from the attempt's lease holder (or the supervisor itself)
 * changes state; a redelivery of one already recorded passes (its lease may be gone).
 */
async function authentic(d: ResultsDeps, m: JsMsg, result: SessionResult): Promise<boolean> {
  const verdict = await verifyResultSource(d.infra.leases, m.subject, result, { requireLease: d.requireLease ?? false });
  if (verdict.ok) return true;
  const recorded = (await d.store.get(result.task_id))?.sessions.find((s) => s.session_id === result.session_id);
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
    await publishDurable(d.infra, subject, body, `${r.session_id}:${r.attempt}:${i}`);
  }
}

/**
 * Once `early_stop_min_usable_sessions` sessions are usable, the stragglers
 * are cancelled: they report ERROR with zero reward and zeroed masks.
 */
async function maybeEarlyStop(d: ResultsDeps, rec: TaskRecord): Promise<void> {
  const min = rec.request.early_stop_min_usable_sessions;
  if (!min || rec.status !== "running" || rec.early_stopped_at) return;
  const usable = rec.sessions.filter((s) => s.usable).length;
  if (usable < min || allDone(rec)) return;
  const reason = `early stop: ${usable} usable sessions reached the minimum of ${min}`;
  const updated = await d.store.update(rec.request.task_id, (r) => {
    if (r.early_stopped_at) return false;
    r.early_stopped_at = new Date().toISOString();
    return true;
  });
  if (!updated?.early_stopped_at) return;
  d.log.info({ task_id: rec.request.task_id, usable, min }, "early stop: cancelling the remaining sessions");
  cancelSessions(d.infra, updated, reason);
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
    error: r.error,
    usable:
      r.status === "COMPLETED" &&
      traces.some((t) => t.prompt_ids.length > 0 && t.response_ids.length > 0 && t.loss_mask.includes(1)),
  };
}
