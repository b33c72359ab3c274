/**
 * Submitting a task as a trainer would, over NATS: submit, follow progress,
 * print a per-session summary, and optionally write every trace from the
 * POLAR_TRACES stream to a JSONL file.
 */
import { createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, DeliverPolicy } from "@nats-io/jetstream";
import { Objm } from "@nats-io/obj";
import { request } from "../nats/messages.ts";
import { readDurable } from "../nats/messages.ts";
import { ValidationError } from "../protocol/errors.ts";
import type { SubmitReply, TaskStatus } from "../protocol/schemas.ts";
import { BUCKETS, STREAMS, SUBJECTS } from "../protocol/subjects.ts";

const FINAL = new Set(["completed", "failed", "cancelled"]);

export async function readTaskFile(path: string): Promise<unknown> {
  const text = await readFile(path, "utf8").catch((err) => {
    throw new ValidationError("task file", [{ path: "", message: `cannot read ${path}: ${(err as Error).message}` }]);
  });
  try {
    return JSON.parse(text);
  } catch {
    throw new ValidationError("task file", [{ path: "", message: `${path} is not valid JSON` }]);
  }
}

export async function submitTask(nc: NatsConnection, task: unknown): Promise<SubmitReply> {
  return request<SubmitReply>(nc, SUBJECTS.api.submit, task);
}

/** Polls the task until it is final, printing a line whenever progress changes. */
export async function waitForTask(
  nc: NatsConnection,
  taskId: string,
  write: (line: string) => void,
  opts: { pollMs?: number; signal?: AbortSignal } = {},
): Promise<TaskStatus> {
  const t0 = Date.now();
  let last = "";
  for (;;) {
    const st = await request<TaskStatus>(nc, SUBJECTS.api.get, { task_id: taskId }, { timeoutMs: 30_000 });
    const counts = new Map<string, number>();
    for (const s of st.sessions) counts.set(s.status, (counts.get(s.status) ?? 0) + 1);
    const line = `${st.completed_sessions}/${st.total_sessions} sessions done (${[...counts].map(([k, v]) => `${k} ${v}`).join(", ")})`;
    if (line !== last) write(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${st.status}: ${line}`);
    last = line;
    if (FINAL.has(st.status)) return st;
    if (opts.signal?.aborted) return st;
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 500));
  }
}

export function formatSummary(st: TaskStatus): string {
  const rows = [["session", "status", "attempt", "reward", "traces", "prompt_tok", "response_tok", "node", "error"]];
  for (const s of st.sessions) {
    rows.push([
      s.session_id,
      s.status,
      String(s.attempt),
      s.reward == null ? "-" : s.reward.toFixed(3),
      String(s.trace_count),
      String(s.prompt_tokens),
      String(s.response_tokens),
      s.node_id ?? "-",
      s.error ? s.error.slice(0, 60) : "",
    ]);
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const lines = rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd());
  return [`task ${st.task_id}: ${st.status}`, ...lines].join("\n");
}

/** Writes every trace of the task from POLAR_TRACES (one JSON object a line); returns the count. */
export async function writeTraces(nc: NatsConnection, taskId: string, path: string, expected: number): Promise<number> {
  const js = jetstream(nc);
  const blobs = await new Objm(nc).open(BUCKETS.blobs);
  const consumer = await js.consumers.get(STREAMS.traces, {
    filter_subjects: SUBJECTS.traceFilter(taskId),
    deliver_policy: DeliverPolicy.All,
  });
  const out = createWriteStream(path);
  let n = 0;
  try {
    while (n < expected) {
      const m = await consumer.next({ expires: 2000 });
      if (!m) break;
      out.write(`${JSON.stringify(await readDurable({ blobs }, m.data, m.headers))}\n`);
      n++;
    }
  } finally {
    await new Promise<void>((r) => out.end(r));
  }
  return n;
}
