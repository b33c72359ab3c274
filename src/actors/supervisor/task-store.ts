/**
 * Durable task state in the `polar_tasks` KV bucket. Every change is a
 * compare-and-set on the entry's revision, so a restarted (or second)
 * supervisor never overwrites a newer state; updates of one task are also
 * serialized in-process.
 */
import type { KV } from "@nats-io/kv";
import { z } from "zod";
import { decode, encode } from "../../protocol/codec.ts";
import { PolarError } from "../../protocol/errors.ts";
import { SessionSummary, TaskRequest, TaskState, TERMINAL_STATUSES } from "../../protocol/schemas.ts";
import { taskKey } from "../../protocol/subjects.ts";

export const TaskRecord = z.object({
  request: TaskRequest,
  status: TaskState,
  sessions: z.array(SessionSummary),
  /** True once every session's dispatch message is durably in POLAR_SESSIONS. */
  dispatched: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
  finished_at: z.string().nullable().default(null),
  /** Set when `early_stop_min_usable_sessions` was reached: the remaining sessions are cancelled. */
  early_stopped_at: z.string().nullable().default(null),
  callback: z
    .object({ delivered: z.boolean(), attempts: z.number().int(), error: z.string().nullable() })
    .nullable()
    .default(null),
});
export type TaskRecord = z.infer<typeof TaskRecord>;

export function countDone(rec: TaskRecord): number {
  return rec.sessions.filter((s) => TERMINAL_STATUSES.has(s.status)).length;
}

export function allDone(rec: TaskRecord): boolean {
  return countDone(rec) === rec.sessions.length;
}

export class TaskStore {
  readonly #kv: KV;
  readonly #chains = new Map<string, Promise<unknown>>();

  constructor(kv: KV) {
    this.#kv = kv;
  }

  async get(taskId: string): Promise<TaskRecord | undefined> {
    return (await this.#getEntry(taskId))?.record;
  }

  /** Creates the record; fails with `conflict` if it exists (unless `replace` says the old one may go). */
  async create(rec: TaskRecord, replace: (old: TaskRecord) => boolean): Promise<void> {
    const key = taskKey(rec.request.task_id);
    const existing = await this.#getEntry(rec.request.task_id);
    if (!existing) {
      try {
        await this.#kv.create(key, encode(rec));
        return;
      } catch (err) {
        throw new PolarError("conflict", `task ${rec.request.task_id} was submitted concurrently`, { cause: err });
      }
    }
    if (!replace(existing.record)) {
      throw new PolarError("conflict", `task ${rec.request.task_id} already exists with status ${existing.record.status}`, {
        details: { task_id: rec.request.task_id, status: existing.record.status },
      });
    }
    await this.#kv.update(key, encode(rec), existing.revision);
  }

  /**
   * Applies `change` to the current record and writes it with CAS, retrying
   * on a concurrent write. `change` returns false to leave the record as is.
   */
  update(taskId: string, change: (rec: TaskRecord) => boolean): Promise<TaskRecord | undefined> {
    const prev = this.#chains.get(taskId) ?? Promise.resolve();
    const next = prev.catch(() => {}).then(() => this.#update(taskId, change));
    this.#chains.set(taskId, next);
    void next.finally(() => {
      if (this.#chains.get(taskId) === next) this.#chains.delete(taskId);
    }).catch(() => {});
    return next;
  }

  async #update(taskId: string, change: (rec: TaskRecord) => boolean): Promise<TaskRecord | undefined> {
    for (let i = 0; i < 20; i++) {
      const entry = await this.#getEntry(taskId);
      if (!entry) return undefined;
      const rec = structuredClone(entry.record);
      if (!change(rec)) return rec;
      rec.updated_at = new Date().toISOString();
      try {
        await this.#kv.update(taskKey(taskId), encode(rec), entry.revision);
        return rec;
      } catch {
        // Revision moved under us: read again and re-apply.
      }
    }
    throw new PolarError("conflict", `task ${taskId}: too many concurrent updates`);
  }

  async *list(): AsyncGenerator<TaskRecord> {
    const keys = await this.#kv.keys();
    for await (const key of keys) {
      const e = await this.#kv.get(key);
      if (e?.value?.length) yield TaskRecord.parse(decode(e.value));
    }
  }

  async #getEntry(taskId: string): Promise<{ record: TaskRecord; revision: number } | undefined> {
    const e = await this.#kv.get(taskKey(taskId));
    if (!e || !e.value?.length || e.operation !== "PUT") return undefined;
    return { record: TaskRecord.parse(decode(e.value)), revision: e.revision };
  }
}
