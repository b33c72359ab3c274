/**
 * Submitting a task as a trainer would, over NATS: submit, follow progress
 * with the trainer client, print a per-session summary, and optionally write
 * every trace from the POLAR_TRACES stream to a JSONL file.
 */
import { createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import type { NatsConnection } from "@nats-io/transport-node";
import { once } from "node:events";
import { PolarClient } from "../client/client.ts";
import type { TaskHandle } from "../client/handle.ts";
import { request } from "../nats/messages.ts";
import { ValidationError } from "../protocol/errors.ts";
import type { SubmitReply, TaskStatus } from "../protocol/schemas.ts";
import { SUBJECTS } from "../protocol/subjects.ts";
import { Progress, type ProgressOptions } from "./progress.ts";

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

/**
 * Follows a task with the trainer client until it is final: a progress line
 * whenever a session's result lands (no status polling), and with `out`
 * every trace written to a JSONL file as it is published.
 */
export async function followTask(
  nc: NatsConnection,
  taskId: string,
  opts: { out?: string; signal?: AbortSignal; progress?: Omit<ProgressOptions, "total"> } = {},
): Promise<{ status: TaskStatus; traces: number }> {
  const client = await PolarClient.connect({ connection: nc });
  const handle = await client.task(taskId);
  const tracesWritten = opts.out ? writeTraces(handle, opts.out, opts.signal) : Promise.resolve(0);
  const progress = new Progress({ total: handle.totalSessions, ...opts.progress });
  try {
    for await (const r of handle.results({ signal: opts.signal })) progress.tick(r.status);
  } finally {
    progress.finish();
  }
  const traces = await tracesWritten;
  return { status: await handle.wait({ signal: opts.signal }), traces };
}

/** The whole TaskStatus, page by page: every session summary and, when asked for, every SessionResult. */
export async function fetchTask(nc: NatsConnection, taskId: string, opts: { withResults?: boolean } = {}): Promise<TaskStatus> {
  const limit = opts.withResults ? 50 : 1000;
  let full: TaskStatus | undefined;
  for (let offset = 0; ; offset += limit) {
    const page = await request<TaskStatus>(nc, SUBJECTS.api.get, { task_id: taskId, offset, limit, with_results: opts.withResults ?? false }, { timeoutMs: 30_000 });
    if (!full) full = page;
    else {
      full.sessions.push(...page.sessions);
      full.results.push(...page.results);
    }
    if (offset + limit >= page.total_sessions) break;
  }
  return { ...full!, offset: 0, limit: full!.sessions.length };
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

/** Writes every trace of the task (one JSON object a line) as it lands; returns the count. */
async function writeTraces(handle: TaskHandle, path: string, signal?: AbortSignal): Promise<number> {
  const out = createWriteStream(path);
  let n = 0;
  try {
    for await (const m of handle.traces({ signal })) {
      const { seq: _seq, ...body } = m;
      if (!out.write(`${JSON.stringify(body)}\n`)) await once(out, "drain");
      n++;
    }
  } finally {
    await new Promise<void>((r) => out.end(r));
  }
  return n;
}
