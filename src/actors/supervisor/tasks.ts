/**
 * The task API, one implementation behind both NATS and HTTP: submit expands
 * `num_samples` into sessions on the dispatch work queue, get/cancel/status
 * read and change durable state.
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { validate } from "../../protocol/codec.ts";
import { PolarError } from "../../protocol/errors.ts";
import {
  CancelRequest,
  EvaluatorNodeInfo,
  GatewayNodeInfo,
  SessionDispatch,
  SessionResult,
  TaskRef,
  TaskRequest,
  TaskStatus,
  TERMINAL_STATUSES,
  type SessionSummary,
  type SubmitReply,
  type SystemStatus,
} from "../../protocol/schemas.ts";
import { STREAMS, SUBJECTS } from "../../protocol/subjects.ts";
import { publishDurable, readDurable } from "../../nats/messages.ts";
import { decode, encode } from "../../protocol/codec.ts";
import type { Infra } from "../../nats/infra.ts";
import { countDone, TaskStore, type TaskRecord } from "./task-store.ts";

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
  status: SessionSummary["status"];
  attempt: number;
  node_id: string | null;
}

export class TaskService {
  constructor(private readonly d: TaskServiceDeps) {}

  async submit(body: unknown): Promise<SubmitReply> {
    const task = validate(TaskRequest, body, "task");
    this.d.check?.(task);
    const now = new Date().toISOString();
    const sessions: SessionSummary[] = Array.from({ length: task.num_samples }, (_, i) => ({
      session_id: `ses-${randomBytes(8).toString("hex")}`,
      sample_index: i,
      status: "REGISTERED",
      attempt: 0,
      node_id: null,
      reward: null,
      trace_count: 0,
      prompt_tokens: 0,
      response_tokens: 0,
      error: null,
      result_seq: null,
      usable: false,
    }));
    const rec: TaskRecord = {
      request: task,
      status: "running",
      sessions,
      dispatched: false,
      created_at: now,
      updated_at: now,
      finished_at: null,
      early_stopped_at: null,
      callback: null,
    };
    // A finished task id may be reused (a new run); a live or cancelled one may not.
    await this.d.store.create(rec, (old) => old.status === "completed" || old.status === "failed");
    await this.dispatch(rec);
    this.d.emit("task.created", { task_id: task.task_id, total_sessions: sessions.length });
    return { task_id: task.task_id, status: "running", total_sessions: sessions.length };
  }

  /** Publishes every session of a task (idempotent: the message id is the session id). */
  async dispatch(rec: TaskRecord): Promise<void> {
    const t = rec.request;
    for (const s of rec.sessions) {
      if (TERMINAL_STATUSES.has(s.status)) continue;
      const metadata = { ...t.metadata };
      const seedBase = t.metadata.eval_sampling_seed_base;
      const agent = structuredClone(t.agent);
      if (typeof seedBase === "number" && Number.isInteger(seedBase)) {
        agent.settings = { ...agent.settings, sampling_seed: seedBase + s.sample_index };
        metadata.eval_sampling_seed = seedBase + s.sample_index;
      }
      const dispatch: SessionDispatch = SessionDispatch.parse({
        session_id: s.session_id,
        task_id: t.task_id,
        instruction: t.instruction,
        dispatch_priority: t.dispatch_priority,
        remaining_timeout_seconds: t.timeout_seconds,
        runtime: t.runtime ?? null,
        agent,
        builder: t.builder,
        evaluator: t.evaluator ?? null,
        metadata,
        sample_index: s.sample_index,
        created_at: rec.created_at,
        max_policy_lag: t.max_policy_lag ?? null,
      });
      await publishDurable(this.d.infra, SUBJECTS.dispatch(t.pool), dispatch, s.session_id);
    }
    await this.d.store.update(t.task_id, (r) => {
      if (r.dispatched) return false;
      r.dispatched = true;
      return true;
    });
  }

  async get(body: unknown): Promise<TaskStatus> {
    const { task_id } = validate(TaskRef, body, "task reference");
    const rec = await this.d.store.get(task_id);
    if (!rec) throw new PolarError("not_found", `unknown task ${task_id}`, { details: { task_id } });
    return this.toStatus(rec, true);
  }

  async cancel(body: unknown): Promise<TaskStatus> {
    const req = validate(CancelRequest, body, "cancel request");
    let rec = await this.d.store.update(req.task_id, (r) => {
      if (r.status !== "running") return false;
      r.status = "cancelling";
      return true;
    });
    if (!rec) {
      if (!req.register_if_missing) throw new PolarError("not_found", `unknown task ${req.task_id}`);
      rec = await this.#tombstone(req.task_id);
    }
    cancelSessions(this.d.infra, rec, "session cancelled");
    this.d.emit("task.updated", { task_id: rec.request.task_id, status: rec.status });
    return this.toStatus(rec, false);
  }

  /** A cancelled, session-less record so that a late submit of the same id is refused. */
  async #tombstone(taskId: string): Promise<TaskRecord> {
    const now = new Date().toISOString();
    const rec: TaskRecord = {
      request: TaskRequest.parse({ task_id: taskId, instruction: "", agent: { harness: "shell", custom_shell: { command: "true" } } }),
      status: "cancelled",
      sessions: [],
      dispatched: true,
      created_at: now,
      updated_at: now,
      finished_at: now,
      early_stopped_at: null,
      callback: null,
    };
    await this.d.store.create(rec, () => false);
    return rec;
  }

  async status(): Promise<SystemStatus> {
    let pending = 0;
    let running = 0;
    for await (const rec of this.d.store.list()) {
      if (rec.status === "running" || rec.status === "cancelling") running++;
    }
    try {
      const info = await this.d.infra.jsm.streams.info(STREAMS.sessions);
      pending = info.state.messages;
    } catch {
      pending = 0;
    }
    let pendingEvals = 0;
    try {
      pendingEvals = (await this.d.infra.jsm.streams.info(STREAMS.evals)).state.messages;
    } catch {
      pendingEvals = 0; // no evaluation was ever requested
    }
    return { pending_sessions: pending, running_tasks: running, nodes: await this.nodes(), evaluators: await this.evaluators(), pending_evaluations: pendingEvals };
  }

  /** Evaluator actors registered in `polar_nodes` (kind `evaluator`). */
  async evaluators(): Promise<EvaluatorNodeInfo[]> {
    const out: EvaluatorNodeInfo[] = [];
    for await (const k of await this.d.infra.nodes.keys()) {
      const e = await this.d.infra.nodes.get(k);
      if (!e?.value?.length || e.operation !== "PUT") continue;
      const r = EvaluatorNodeInfo.safeParse(decode(e.value));
      if (!r.success) continue;
      const age = Date.now() - Date.parse(r.data.last_heartbeat);
      out.push({ ...r.data, healthy: age < 2.5 * r.data.heartbeat_interval_seconds * 1000 });
    }
    return out;
  }

  async nodes(): Promise<GatewayNodeInfo[]> {
    const out: GatewayNodeInfo[] = [];
    const keys = await this.d.infra.nodes.keys();
    for await (const k of keys) {
      const e = await this.d.infra.nodes.get(k);
      if (!e?.value?.length || e.operation !== "PUT") continue;
      const r = GatewayNodeInfo.safeParse(decode(e.value));
      if (!r.success) continue;
      const age = Date.now() - Date.parse(r.data.last_heartbeat);
      out.push({ ...r.data, healthy: age < 2.5 * r.data.heartbeat_interval_seconds * 1000 });
    }
    return out;
  }

  /** TaskStatus with the SessionResults read back from POLAR_RESULTS. */
  async toStatus(rec: TaskRecord, withResults: boolean): Promise<TaskStatus> {
    const results = withResults ? await this.results(rec) : [];
    return TaskStatus.parse({
      task_id: rec.request.task_id,
      status: rec.status,
      total_sessions: rec.sessions.length,
      completed_sessions: countDone(rec),
      results,
      result_paths: [],
      sessions: rec.sessions.map((s) => (TERMINAL_STATUSES.has(s.status) ? s : { ...s, ...this.d.live.get(s.session_id) })),
      created_at: rec.created_at,
      updated_at: rec.updated_at,
      callback: rec.callback,
    });
  }

  /** The most recently created tasks, newest first, without their results. */
  async list(limit: number): Promise<TaskStatus[]> {
    const recs: TaskRecord[] = [];
    for await (const rec of this.d.store.list()) recs.push(rec);
    recs.sort((a, b) => b.created_at.localeCompare(a.created_at));
    return Promise.all(recs.slice(0, limit).map((r) => this.toStatus(r, false)));
  }

  /** One session's SessionResult, or not_found. */
  async sessionResult(taskId: string, sessionId: string): Promise<SessionResult> {
    const rec = await this.d.store.get(taskId);
    const s = rec?.sessions.find((x) => x.session_id === sessionId);
    if (!rec || !s) throw new PolarError("not_found", `unknown session ${sessionId} of task ${taskId}`, { details: { task_id: taskId, session_id: sessionId } });
    if (s.result_seq == null) throw new PolarError("not_found", `session ${sessionId} has no result yet`, { details: { status: s.status } });
    const m = await this.d.infra.jsm.streams.getMessage(STREAMS.results, { seq: s.result_seq });
    if (!m) throw new PolarError("not_found", `the result of session ${sessionId} is no longer retained`);
    return validate(SessionResult, await readDurable(this.d.infra, m.data, m.header), "session result");
  }

  async results(rec: TaskRecord): Promise<SessionResult[]> {
    const out: SessionResult[] = [];
    for (const s of rec.sessions) {
      if (s.result_seq == null) continue;
      const m = await this.d.infra.jsm.streams.getMessage(STREAMS.results, { seq: s.result_seq });
      if (!m) continue;
      const r = SessionResult.safeParse(await readDurable(this.d.infra, m.data, m.header));
      if (r.success) out.push(r.data);
    }
    return out;
  }
}

/** Tells every gateway to cancel the task's unfinished sessions (queued ones are refused at pull time). */
export function cancelSessions(infra: Infra, rec: TaskRecord, reason: string): void {
  for (const s of rec.sessions) {
    if (!TERMINAL_STATUSES.has(s.status)) infra.nc.publish(SUBJECTS.sessionCancel(s.session_id), encode({ reason }));
  }
}
