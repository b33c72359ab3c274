/**
 * Durable task state in the `polar_tasks` KV bucket, sized so that nothing
 * grows with `num_samples`: a small header per task (request, status,
 * counters), one entry per session, and a `live` index entry while the task
 * runs or its callback is pending. Every change is a compare-and-set on the
 * entry's revision (changes of one task are also serialized in-process), so a
 * restarted or second supervisor never overwrites a newer state. A result
 * costs O(1) writes; only listing a task's sessions reads them all.
 */
import { kvKeys } from "../../nats/kv-keys.ts";
import { randomBytes } from "node:crypto";
import type { KV } from "@nats-io/kv";
import type { Logger } from "pino";
import { z } from "zod";
import { decode, encode } from "../../protocol/codec.ts";
import { errorMessage, PolarError } from "../../protocol/errors.ts";
import { SessionSummary, TaskRequest, TaskState, type TaskFlags } from "../../protocol/schemas.ts";
import { TASK_KEYS, taskFlagsKey } from "../../protocol/subjects.ts";
import { isWrongRevision, withRetry } from "../../nats/retry.ts";

const Callback = z.object({ delivered: z.boolean(), attempts: z.number().int(), error: z.string().nullable() });

export const TaskHeader = z.object({
  request: TaskRequest,
  status: TaskState,
  /** Names this run of the task id; session ids and keys carry it. */
  run: z.string(),
  total: z.number().int().min(0),
  /** True once every session's dispatch message is durably in POLAR_SESSIONS. */
  dispatched: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
  finished_at: z.string().nullable().default(null),
  /** Set when `early_stop_min_usable_sessions` was reached: the remaining sessions are cancelled. */
  early_stopped_at: z.string().nullable().default(null),
  callback: Callback.nullable().default(null),
  /** Finished sessions: total, usable, by status (exact once the task is final; see results.ts). */
  counts: z
    .object({ done: z.number().int(), usable: z.number().int(), by_status: z.record(z.string(), z.number().int()) })
    .default({ done: 0, usable: 0, by_status: {} }),
});
export type TaskHeader = z.infer<typeof TaskHeader>;

/** A session's summary plus whether its result is already in the header's counters. */
export const SessionEntry = SessionSummary.extend({ counted: z.boolean().default(false) });
export type SessionEntry = z.infer<typeof SessionEntry>;

export const newRun = (): string => randomBytes(6).toString("hex");
export const sessionIdOf = (run: string, index: number): string => `ses-${run}-${index}`;

/** The run and sample index a session id names, or undefined for an id this supervisor never made. */
export function parseSessionId(id: string): { run: string; index: number } | undefined {
  const m = /^ses-([0-9a-f]{12})-(\d{1,5})$/.exec(id);
  return m ? { run: m[1], index: Number(m[2]) } : undefined;
}

export function emptySession(run: string, index: number): SessionEntry {
  return {
    session_id: sessionIdOf(run, index),
    sample_index: index,
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
    counted: false,
  };
}

/** Writes of many sessions in flight at once. */
const WINDOW = 128;

export class TaskStore {
  readonly #kv: KV;
  /** Reads that must see every acknowledged write (see Infra.tasksLeader); `#kv` when not given. */
  readonly #leader: KV;
  readonly #flags?: KV;
  readonly #maxValueBytes: number;
  readonly #log?: Logger;
  readonly #chains = new Map<string, Promise<unknown>>();

  constructor(kv: KV, opts: { flags?: KV; leader?: KV; maxValueBytes?: number; log?: Logger } = {}) {
    this.#kv = kv;
    this.#leader = opts.leader ?? kv;
    this.#flags = opts.flags;
    this.#maxValueBytes = opts.maxValueBytes ?? 1024 * 1024 - 16 * 1024;
    this.#log = opts.log;
  }

  async get(taskId: string): Promise<TaskHeader | undefined> {
    return (await this.#getHeader(taskId))?.header;
  }

  /**
   * Stores a new task: its session entries, then the header (CAS: fails with
   * `conflict` if a live one exists, unless `replace` says the old may go),
   * then its live index entry. A record too large to store is refused first.
   */
  async create(header: TaskHeader, replace: (old: TaskHeader) => boolean): Promise<void> {
    const taskId = header.request.task_id;
    const bytes = encode(header);
    if (bytes.length > this.#maxValueBytes) {
      throw new PolarError("payload_too_large", `task ${taskId}: its record is ${bytes.length} bytes, more than the store's limit of ${this.#maxValueBytes} (shorten the instruction or metadata)`, {
        details: { task_id: taskId, bytes: bytes.length, limit: this.#maxValueBytes },
      });
    }
    const existing = await this.#getHeader(taskId, this.#leader);
    if (existing && !replace(existing.header)) {
      throw new PolarError("conflict", `task ${taskId} already exists with status ${existing.header.status}`, {
        details: { task_id: taskId, status: existing.header.status },
      });
    }
    await inWindows(header.total, (i) => this.#retry(() => this.#kv.put(TASK_KEYS.session(taskId, header.run, i), encode(emptySession(header.run, i)))));
    try {
      if (existing) await this.#kv.update(TASK_KEYS.header(taskId), bytes, existing.revision);
      else await this.#kv.create(TASK_KEYS.header(taskId), bytes);
    } catch (err) {
      if (!isWrongRevision(err)) throw err;
      throw new PolarError("conflict", `task ${taskId} was submitted concurrently by another client`, { cause: err });
    }
    await this.#retry(() => this.#kv.put(TASK_KEYS.live(taskId), encode({ task_id: taskId })));
    await this.#writeFlags(header);
    if (existing) void this.#purgeRun(taskId, existing.header);
  }

  /**
   * Applies `change` to the current header and writes it with CAS, retrying
   * on a concurrent write. `change` returns false to leave it as is.
   */
  updateHeader(taskId: string, change: (h: TaskHeader) => boolean): Promise<TaskHeader | undefined> {
    const prev = this.#chains.get(taskId) ?? Promise.resolve();
    const next = prev.then(
      () => this.#updateHeader(taskId, change),
      () => this.#updateHeader(taskId, change),
    );
    this.#chains.set(taskId, next);
    const clear = () => {
      if (this.#chains.get(taskId) === next) this.#chains.delete(taskId);
    };
    next.then(clear, clear);
    return next;
  }

  async #updateHeader(taskId: string, change: (h: TaskHeader) => boolean): Promise<TaskHeader | undefined> {
    for (let i = 0; i < 50; i++) {
      const entry = await this.#getHeader(taskId, this.#leader);
      if (!entry) return undefined;
      const h = structuredClone(entry.header);
      const before = { status: h.status, early: h.early_stopped_at };
      if (!change(h)) return h;
      h.updated_at = new Date().toISOString();
      try {
        await this.#retry(() => this.#kv.update(TASK_KEYS.header(taskId), encode(h), entry.revision));
      } catch (err) {
        if (isWrongRevision(err)) continue; // another writer won: read again and re-apply
        throw err;
      }
      if (before.status !== h.status || before.early !== h.early_stopped_at) await this.#writeFlags(h);
      return h;
    }
    throw new PolarError("unavailable", `task ${taskId}: too many concurrent updates`);
  }

  async getSession(taskId: string, run: string, index: number): Promise<{ entry: SessionEntry; revision: number } | undefined> {
    return this.#readSession(this.#kv, taskId, run, index);
  }

  /** One session entry with every acknowledged write applied (read from the stream's leader). */
  async getSessionLatest(taskId: string, run: string, index: number): Promise<SessionEntry | undefined> {
    return (await this.#readSession(this.#leader, taskId, run, index))?.entry;
  }

  async #readSession(kv: KV, taskId: string, run: string, index: number): Promise<{ entry: SessionEntry; revision: number } | undefined> {
    const e = await this.#retry(() => kv.get(TASK_KEYS.session(taskId, run, index)));
    if (!e || !e.value?.length || e.operation !== "PUT") return undefined;
    return { entry: SessionEntry.parse(decode(e.value)), revision: e.revision };
  }

  /** CAS update of one session entry; `change` returns false to leave it. */
  async updateSession(taskId: string, run: string, index: number, change: (s: SessionEntry) => boolean): Promise<SessionEntry | undefined> {
    for (let i = 0; i < 50; i++) {
      const cur = await this.#readSession(this.#leader, taskId, run, index);
      if (!cur) return undefined;
      const s = structuredClone(cur.entry);
      if (!change(s)) return s;
      try {
        await this.#retry(() => this.#kv.update(TASK_KEYS.session(taskId, run, index), encode(s), cur.revision));
        return s;
      } catch (err) {
        if (!isWrongRevision(err)) throw err;
      }
    }
    throw new PolarError("unavailable", `session ${index} of task ${taskId}: too many concurrent updates`);
  }

  /** Overwrites a session entry whatever it held (the last resort for a result that cannot be recorded). */
  async putSession(taskId: string, run: string, index: number, entry: SessionEntry): Promise<void> {
    await this.#retry(() => this.#kv.put(TASK_KEYS.session(taskId, run, index), encode(entry)));
  }

  /** The sessions with sample index in [offset, offset + limit). */
  async sessionPage(h: TaskHeader, offset: number, limit: number): Promise<SessionEntry[]> {
    const end = Math.min(h.total, offset + limit);
    const out: Array<SessionEntry | undefined> = new Array(Math.max(0, end - offset));
    await inWindows(out.length, async (i) => {
      out[i] = (await this.getSession(h.request.task_id, h.run, offset + i))?.entry ?? emptySession(h.run, offset + i);
    });
    return out as SessionEntry[];
  }

  /** Every session of the task, in one ordered read of the bucket (cost: the task's size, once). */
  async *sessions(h: TaskHeader): AsyncGenerator<SessionEntry> {
    const it = await this.#retry(() => this.#kv.history({ key: TASK_KEYS.sessions(h.request.task_id, h.run) }));
    for await (const e of it) {
      if (e.operation !== "PUT" || !e.value?.length) continue;
      const r = SessionEntry.safeParse(decodeOrNull(e.value));
      if (r.success) yield r.data;
      else this.#log?.error({ key: e.key }, "unreadable session entry skipped");
    }
  }

  /** Every task header (one ordered read; for listings that show finished tasks too). */
  async *headers(): AsyncGenerator<TaskHeader> {
    const it = await this.#retry(() => this.#kv.history({ key: TASK_KEYS.headerAll }));
    for await (const e of it) {
      if (e.operation !== "PUT" || !e.value?.length) continue;
      const r = TaskHeader.safeParse(decodeOrNull(e.value));
      if (r.success) yield r.data;
      else this.#log?.error({ key: e.key }, "unreadable task header skipped");
    }
  }

  /** Ids of live tasks (running, cancelling, or with a callback pending). */
  async liveTaskIds(): Promise<string[]> {
    const out: string[] = [];
    for (const k of await this.#retry(() => kvKeys(this.#kv, TASK_KEYS.liveAll))) {
      try {
        out.push(TASK_KEYS.liveTaskId(k));
      } catch (err) {
        this.#log?.error({ key: k, err: errorMessage(err) }, "live index key names no task");
      }
    }
    return out;
  }

  async removeLive(taskId: string): Promise<void> {
    await this.#retry(() => this.#kv.delete(TASK_KEYS.live(taskId)));
  }

  async #getHeader(taskId: string, kv: KV = this.#kv): Promise<{ header: TaskHeader; revision: number } | undefined> {
    const e = await this.#retry(() => kv.get(TASK_KEYS.header(taskId)));
    if (!e || !e.value?.length || e.operation !== "PUT") return undefined;
    const r = TaskHeader.safeParse(decodeOrNull(e.value));
    if (!r.success) throw new PolarError("internal", `task ${taskId}: its stored record is unreadable`, { details: { key: e.key } });
    return { header: r.data, revision: e.revision };
  }

  async #writeFlags(h: TaskHeader): Promise<void> {
    if (!this.#flags) return;
    const flags: TaskFlags = { task_id: h.request.task_id, status: h.status, early_stopped_at: h.early_stopped_at };
    await this.#retry(() => this.#flags!.put(taskFlagsKey(h.request.task_id), encode(flags)));
  }

  /** Removes the session entries of a replaced run (in the background: nothing reads them). */
  async #purgeRun(taskId: string, old: TaskHeader): Promise<void> {
    try {
      await inWindows(old.total, (i) => this.#kv.purge(TASK_KEYS.session(taskId, old.run, i)));
    } catch (err) {
      this.#log?.warn({ task_id: taskId, err: errorMessage(err) }, "could not purge a replaced run's sessions (retention removes them)");
    }
  }

  #retry<T>(fn: () => Promise<T>): Promise<T> {
    return withRetry(fn, { log: this.#log, what: "task store" });
  }
}

function decodeOrNull(value: Uint8Array): unknown {
  try {
    return decode(value);
  } catch {
    return null; // schema parse then reports it as unreadable
  }
}

/** Runs `fn(i)` for i in [0, n) with at most WINDOW in flight. */
export async function inWindows(n: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(WINDOW, n) }, worker));
}
