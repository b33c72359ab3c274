/** A submitted task, from the trainer's side: its results, traces, GRPO group, cancel. */
import type { SessionSummary, TaskStatus } from "../protocol/schemas.ts";
import { buildGroup } from "./grpo.ts";
import { readAllSessions } from "./status-pages.ts";
import type { Transport } from "./transport.ts";
import type { Group, ResultMessage, StreamOptions, TraceMessage } from "./types.ts";

const FINAL = new Set(["completed", "failed", "cancelled"]);

export interface GroupOptions {
  /** Divide by the group's reward std (default true). */
  normalizeStd?: boolean;
  signal?: AbortSignal;
}

export class TaskHandle {
  readonly taskId: string;
  readonly totalSessions: number;
  readonly #t: Transport;
  #sessions: Promise<SessionSummary[]> | undefined;

  constructor(t: Transport, taskId: string, totalSessions: number, sessions?: SessionSummary[]) {
    this.#t = t;
    this.taskId = taskId;
    this.totalSessions = totalSessions;
    if (sessions) this.#sessions = Promise.resolve(sessions);
  }

  /** The sessions of this run of the task (read once, every status page, and kept). */
  #sessionIds(signal?: AbortSignal): Promise<string[]> {
    this.#sessions ??= this.#readAll({ signal }).then((st) => st.sessions);
    this.#sessions.catch(() => (this.#sessions = undefined));
    return this.#sessions.then((ss) => ss.map((s) => s.session_id));
  }

  #readAll(opts: { first?: TaskStatus; signal?: AbortSignal } = {}): Promise<TaskStatus> {
    return readAllSessions(this.#t, this.taskId, { pageSize: this.#t.statusPageSize, ...opts });
  }

  /** The task's status now with every session summary (read page by page; `offset` 0, `limit` the session count). */
  status(opts: { signal?: AbortSignal } = {}): Promise<TaskStatus> {
    return this.#readAll(opts);
  }

  /** Each session's SessionResult as it lands (replayed for a finished task); ends after the last. */
  async *results(opts: StreamOptions = {}): AsyncGenerator<ResultMessage> {
    yield* this.#t.results(this.taskId, await this.#sessionIds(opts.signal), opts);
  }

  /**
   * Every trace of the task, each exactly once, from `fromSeq` (a trace's `seq`
   * + 1 resumes after it); replayed from POLAR_TRACES for a finished task, live
   * for a running one. Ends when every session has reported and all its traces passed.
   */
  async *traces(opts: StreamOptions = {}): AsyncGenerator<TraceMessage> {
    yield* this.#t.traces(this.taskId, await this.#sessionIds(opts.signal), opts);
  }

  /** Resolves once every session has ended: each session's traces, reward, status and advantage. */
  async group(opts: GroupOptions = {}): Promise<Group> {
    const traces: TraceMessage[] = [];
    for await (const m of this.traces({ signal: opts.signal })) traces.push(m);
    const st = await this.#finalStatus(opts.signal);
    return buildGroup(this.taskId, st.status, st.sessions, traces, opts.normalizeStd ?? true);
  }

  /** Resolves with the final TaskStatus once every session has reported (follows results, then one status read). */
  async wait(opts: { signal?: AbortSignal } = {}): Promise<TaskStatus> {
    for await (const _ of this.results({ signal: opts.signal })) void _;
    return this.#finalStatus(opts.signal);
  }

  /**
   * Every session has reported once the traces end; the supervisor records the
   * last results moments later. Reads the first status page until the task is
   * final, then the other pages.
   */
  async #finalStatus(signal?: AbortSignal): Promise<TaskStatus> {
    const page = { offset: 0, limit: this.#t.statusPageSize };
    for (let delay = 5; ; delay = Math.min(delay * 2, 500)) {
      const first = await this.#t.get(this.taskId, page);
      if (FINAL.has(first.status)) return this.#readAll({ first, signal });
      signal?.throwIfAborted();
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  /** Cancels the task's unfinished sessions (they end as ERROR with zeroed masks); the status then, with every session. */
  async cancel(opts: { signal?: AbortSignal } = {}): Promise<TaskStatus> {
    return this.#readAll({ first: await this.#t.cancel(this.taskId), signal: opts.signal });
  }
}
