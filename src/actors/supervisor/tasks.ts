/**
 * The task API, one implementation behind both NATS and HTTP: submit expands
 * `num_samples` into sessions on the dispatch work queue, get/cancel/status
 * read and change durable state.
 */
import type { z } from "zod";
import { kvKeys } from "../../nats/kv-keys.ts";
import type { Logger } from "pino";
import { validate } from "../../protocol/codec.ts";
import { PolarError } from "../../protocol/errors.ts";
import {
  CancelRequest,
  EvaluatorNodeInfo,
  GatewayNodeInfo,
  SessionDispatch,
  SessionRef,
  SessionResult,
  TaskGet,
  TaskRequest,
  TaskStatus,
  TERMINAL_STATUSES,
  type SessionStatus,
  type SubmitReply,
  type SystemStatus,
} from "../../protocol/schemas.ts";
import { STREAMS, SUBJECTS } from "../../protocol/subjects.ts";
import { publishDurable, readDurable } from "../../nats/messages.ts";
import { decode, encode } from "../../protocol/codec.ts";
import type { Infra } from "../../nats/infra.ts";
import { withRetry } from "../../nats/retry.ts";
import { errorMessage } from "../../protocol/errors.ts";
import { inWindows, newRun, parseSessionId, sessionIdOf, type TaskHeader, type SessionEntry, type TaskStore } from "./task-store.ts";

/** Checks a task's strategy names and configs against the registries (fails with every bad field). */
export type SpecChecker = (task: TaskRequest) => void;

export interface TaskServiceDeps {
  infra: Infra;
  store: TaskStore;
  log: Logger;
  check?: SpecChecker;
  emit: (kind: "task.created" | "task.updated" | "task.done", body: unknown) => void;
  /** Live stage of sessions still running (from gateway events), shown until their result lands. */
  live: Map<string, LiveState>;
}

export interface LiveState {
  status: SessionStatus;
  attempt: number;
  node_id: string | null;
}

export class TaskService {
  constructor(private readonly d: TaskServiceDeps) {}

  async submit(body: unknown): Promise<SubmitReply> {
    const task = validate(TaskRequest, body, "task");
    this.d.check?.(task);
    const now = new Date().toISOString();
    const header: TaskHeader = {
      request: task,
      status: "running",
      run: newRun(),
      total: task.num_samples,
      dispatched: false,
      created_at: now,
      updated_at: now,
      finished_at: null,
      early_stopped_at: null,
      callback: null,
      counts: { done: 0, usable: 0, by_status: {} },
    };
    // A finished task id may be reused (a new run); a live or cancelled one may not.
    await this.d.store.create(header, (old) => old.status === "completed" || old.status === "failed");
    await this.dispatch(header);
    this.d.emit("task.created", { task_id: task.task_id, total_sessions: header.total });
    return { task_id: task.task_id, status: "running", total_sessions: header.total };
  }

  /**
   * Publishes every session of a task (idempotent: the message id is the
   * session id). After a restart, `skip` leaves out sessions already finished.
   */
  async dispatch(h: TaskHeader, skip: ReadonlySet<number> = new Set()): Promise<void> {
    const t = h.request;
    await inWindows(h.total, async (i) => {
      if (skip.has(i)) return;
      const session_id = sessionIdOf(h.run, i);
      const metadata = { ...t.metadata };
      const seedBase = t.metadata.eval_sampling_seed_base;
      // The per-session seed travels in the metadata; agent settings are the harness's own schema.
      if (typeof seedBase === "number" && Number.isInteger(seedBase)) metadata.eval_sampling_seed = seedBase + i;
      const dispatch: SessionDispatch = SessionDispatch.parse({
        session_id,
        task_id: t.task_id,
        instruction: t.instruction,
        dispatch_priority: t.dispatch_priority,
        remaining_timeout_seconds: t.timeout_seconds,
        runtime: t.runtime ?? null,
        agent: t.agent,
        builder: t.builder,
        evaluator: t.evaluator ?? null,
        metadata,
        sample_index: i,
        created_at: h.created_at,
        queue_deadline_at: t.queue_timeout_seconds == null ? null : new Date(Date.parse(h.created_at) + t.queue_timeout_seconds * 1000).toISOString(),
        max_policy_lag: t.max_policy_lag ?? null,
      });
      await withRetry(() => publishDurable(this.d.infra, SUBJECTS.dispatch(t.pool), dispatch, session_id), { log: this.d.log, what: "dispatch" });
    });
    await this.d.store.updateHeader(t.task_id, (r) => {
      if (r.dispatched || r.run !== h.run) return false;
      r.dispatched = true;
      return true;
    });
  }

  /** A status poll: counters and one page of session summaries; SessionResults only when asked for. */
  async get(body: unknown): Promise<TaskStatus> {
    const q = validate(TaskGet, body, "task query");
    const h = await this.d.store.get(q.task_id);
    if (!h) throw new PolarError("not_found", `unknown task ${q.task_id}`, { details: { task_id: q.task_id } });
    return this.toStatus(h, { withResults: q.with_results, offset: q.offset, limit: q.limit });
  }

  async cancel(body: unknown): Promise<TaskStatus> {
    const req = validate(CancelRequest, body, "cancel request");
    let h = await this.d.store.updateHeader(req.task_id, (r) => {
      if (r.status !== "running") return false;
      r.status = "cancelling";
      return true;
    });
    if (!h) {
      if (!req.register_if_missing) throw new PolarError("not_found", `unknown task ${req.task_id}`);
      h = await this.#tombstone(req.task_id);
    }
    await cancelSessions(this.d.infra, this.d.store, h, "session cancelled");
    this.d.emit("task.updated", { task_id: h.request.task_id, status: h.status });
    return this.toStatus(h, { withResults: false, offset: 0, limit: 1000 });
  }

  /** A cancelled, session-less record so that a late submit of the same id is refused. */
  async #tombstone(taskId: string): Promise<TaskHeader> {
    const now = new Date().toISOString();
    const h: TaskHeader = {
      request: TaskRequest.parse({ task_id: taskId, instruction: "", agent: { harness: "shell", custom_shell: { command: "true" } } }),
      status: "cancelled",
      run: newRun(),
      total: 0,
      dispatched: true,
      created_at: now,
      updated_at: now,
      finished_at: now,
      early_stopped_at: null,
      callback: null,
      counts: { done: 0, usable: 0, by_status: {} },
    };
    await this.d.store.create(h, () => false);
    await this.d.store.removeLive(taskId);
    return h;
  }

  /** Running tasks (from the live index: cost is the live tasks'), queue depth, nodes, pools nobody serves. */
  async status(): Promise<SystemStatus> {
    let running = 0;
    for (const id of await this.d.store.liveTaskIds()) {
      try {
        const h = await this.d.store.get(id);
        if (h?.status === "running" || h?.status === "cancelling") running++;
      } catch (err) {
        this.d.log.error({ task_id: id, err: errorMessage(err) }, "unreadable task skipped in status");
      }
    }
    const registered = await this.#registered();
    const nodes = registeredAs(GatewayNodeInfo, registered);
    const byPool = await this.pendingByPool();
    const served = new Set(nodes.filter((n) => n.healthy).map((n) => n.pool));
    const unserved_pools = [...byPool].filter(([pool, n]) => n > 0 && !served.has(pool)).map(([pool, n]) => ({ pool, pending_sessions: n }));
    const pending = [...byPool.values()].reduce((a, b) => a + b, 0);
    let pendingEvals = 0;
    try {
      pendingEvals = (await this.d.infra.jsm.streams.info(STREAMS.evals)).state.messages;
    } catch {
      pendingEvals = 0; // no evaluation was ever requested
    }
    return { pending_sessions: pending, running_tasks: running, nodes, unserved_pools, evaluators: registeredAs(EvaluatorNodeInfo, registered), pending_evaluations: pendingEvals };
  }

  /** Evaluator actors registered in `polar_nodes` (kind `evaluator`). */
  async evaluators(): Promise<EvaluatorNodeInfo[]> {
    return registeredAs(EvaluatorNodeInfo, await this.#registered());
  }

  /** Queued dispatch messages per pool. */
  async pendingByPool(): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const info = await this.d.infra.jsm.streams.info(STREAMS.sessions, { subjects_filter: SUBJECTS.streamSubjects.sessions });
    const prefix = SUBJECTS.streamSubjects.sessions.slice(0, -1);
    for (const [subject, n] of Object.entries(info.state.subjects ?? {})) out.set(subject.slice(prefix.length), n);
    return out;
  }

  /** Gateways registered in `polar_nodes`. */
  async nodes(): Promise<GatewayNodeInfo[]> {
    return registeredAs(GatewayNodeInfo, await this.#registered());
  }

  /** Every entry of `polar_nodes` (gateways and evaluators), decoded, in one listing. */
  async #registered(): Promise<unknown[]> {
    const out: unknown[] = [];
    for (const k of await kvKeys(this.d.infra.nodes)) {
      const e = await this.d.infra.nodes.get(k);
      if (e?.value?.length && e.operation === "PUT") out.push(decode(e.value));
    }
    return out;
  }


  /** TaskStatus of one page of sessions, with their SessionResults read back from POLAR_RESULTS when asked for. */
  async toStatus(h: TaskHeader, page: { withResults: boolean; offset: number; limit: number }): Promise<TaskStatus> {
    const sessions = await this.d.store.sessionPage(h, page.offset, page.limit);
    const results = page.withResults ? await this.results(sessions) : [];
    return TaskStatus.parse({
      task_id: h.request.task_id,
      status: h.status,
      total_sessions: h.total,
      completed_sessions: h.counts.done,
      results,
      result_paths: [],
      sessions: sessions.map(({ counted: _, ...s }) => (TERMINAL_STATUSES.has(s.status) ? s : { ...s, ...this.d.live.get(s.session_id) })),
      status_counts: h.counts.by_status,
      usable_sessions: h.counts.usable,
      offset: page.offset,
      limit: page.limit,
      created_at: h.created_at,
      updated_at: h.updated_at,
      finished_at: h.finished_at,
      early_stopped_at: h.early_stopped_at,
      callback: h.callback,
    });
  }

  /** The most recently created tasks, newest first, without their results (one ordered read of the task headers). */
  async list(limit: number): Promise<TaskStatus[]> {
    const headers: TaskHeader[] = [];
    for await (const h of this.d.store.headers()) headers.push(h);
    headers.sort((a, b) => b.created_at.localeCompare(a.created_at));
    return Promise.all(headers.slice(0, limit).map((h) => this.toStatus(h, { withResults: false, offset: 0, limit: 100 })));
  }

  /** One session's SessionResult, or not_found. */
  async sessionResult(taskId: string, sessionId: string): Promise<SessionResult> {
    validate(SessionRef, { task_id: taskId, session_id: sessionId }, "session reference");
    const h = await this.d.store.get(taskId);
    const ids = parseSessionId(sessionId);
    const s = h && ids && ids.run === h.run ? (await this.d.store.getSession(taskId, ids.run, ids.index))?.entry : undefined;
    if (!h || !s) throw new PolarError("not_found", `unknown session ${sessionId} of task ${taskId}`, { details: { task_id: taskId, session_id: sessionId } });
    if (s.result_seq == null) throw new PolarError("not_found", `session ${sessionId} has no result yet`, { details: { status: s.status } });
    const m = await this.d.infra.jsm.streams.getMessage(STREAMS.results, { seq: s.result_seq });
    if (!m) throw new PolarError("not_found", `the result of session ${sessionId} is no longer retained`);
    return validate(SessionResult, await readDurable(this.d.infra, m.data, m.header), "session result");
  }

  async results(sessions: Iterable<SessionEntry>): Promise<SessionResult[]> {
    const out: SessionResult[] = [];
    for (const s of sessions) {
      if (s.result_seq == null) continue;
      const m = await withRetry(() => this.d.infra.jsm.streams.getMessage(STREAMS.results, { seq: s.result_seq! }), { log: this.d.log });
      if (!m) continue;
      const r = SessionResult.safeParse(await readDurable(this.d.infra, m.data, m.header));
      if (r.success) out.push(r.data);
    }
    return out;
  }
}

/** Tells every gateway to cancel the task's unfinished sessions (queued ones are refused at pull time). */
export async function cancelSessions(infra: Infra, store: TaskStore, h: TaskHeader, reason: string): Promise<void> {
  for await (const s of store.sessions(h)) {
    if (!TERMINAL_STATUSES.has(s.status)) infra.nc.publish(SUBJECTS.sessionCancel(s.session_id), encode({ reason }));
  }
}

/** The entries that are of one kind, each marked healthy while its heartbeats are recent. */
function registeredAs<S extends typeof GatewayNodeInfo | typeof EvaluatorNodeInfo>(schema: S, entries: unknown[]): Array<z.infer<S>> {
  const out: Array<z.infer<S>> = [];
  for (const v of entries) {
    const r = schema.safeParse(v);
    if (!r.success) continue;
    const age = Date.now() - Date.parse(r.data.last_heartbeat);
    out.push({ ...r.data, healthy: age < 2.5 * r.data.heartbeat_interval_seconds * 1000 } as z.infer<S>);
  }
  return out;
}
