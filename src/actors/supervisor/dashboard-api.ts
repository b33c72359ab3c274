/**
 * The dashboard's read-only API (the page itself is static):
 * GET /dashboard/api/tasks?limit=N — recent tasks with counts and rewards;
 * GET /dashboard/api/task/{id} — one task's sessions with their timings;
 * GET /dashboard/api/trace/{task}/{session} — a session's traces decoded
 * token by token with the Qwen3 tokenizer.
 */
import { PolarError } from "../../protocol/errors.ts";
import { TERMINAL_STATUSES, type TaskStatus } from "../../protocol/schemas.ts";
import { decodeSession } from "../../dashboard/decode-trace.ts";
import { qwen3Tokenizer } from "../../tokenizer/qwen3.ts";
import type { TaskService } from "./tasks.ts";

const MAX_TASKS = 500;
/** Sessions whose timings are read back for one task view. */
const MAX_TIMED_SESSIONS = 256;

export async function dashboardRoute(tasks: TaskService, method: string, path: string, url: URL): Promise<unknown> {
  if (method !== "GET") throw new PolarError("not_found", `no route ${method} ${path}`);
  if (path === "/dashboard/api/tasks") {
    const limit = Math.min(MAX_TASKS, Math.max(1, Number(url.searchParams.get("limit") ?? 100) || 100));
    return { tasks: (await tasks.list(limit)).map(overview) };
  }
  const t = /^\/dashboard\/api\/task\/([^/]+)$/.exec(path);
  if (t) return taskView(tasks, decode(t[1]));
  const tr = /^\/dashboard\/api\/trace\/([^/]+)\/([^/]+)$/.exec(path);
  if (tr) return decodeSession(qwen3Tokenizer(), await tasks.sessionResult(decode(tr[1]), decode(tr[2])));
  throw new PolarError("not_found", `no route ${method} ${path}`);
}

function decode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new PolarError("validation", "malformed percent-encoding in the path");
  }
}

function overview(st: TaskStatus) {
  const counts: Record<string, number> = {};
  for (const s of st.sessions) counts[s.status] = (counts[s.status] ?? 0) + 1;
  return {
    task_id: st.task_id,
    status: st.status,
    total_sessions: st.total_sessions,
    completed_sessions: st.completed_sessions,
    counts,
    rewards: st.sessions.filter((s) => TERMINAL_STATUSES.has(s.status) && s.reward != null).map((s) => s.reward as number),
    created_at: st.created_at ?? null,
    updated_at: st.updated_at ?? null,
  };
}

async function taskView(tasks: TaskService, taskId: string) {
  const st = await tasks.get({ task_id: taskId, with_results: true, limit: 200 });
  const timings = new Map<string, Record<string, number>>();
  const done = st.sessions.filter((s) => TERMINAL_STATUSES.has(s.status)).slice(0, MAX_TIMED_SESSIONS);
  for (const r of st.results) {
    if (done.some((s) => s.session_id === r.session_id)) timings.set(r.session_id, pickTiming(r.timing));
  }
  return {
    ...overview(st),
    callback: st.callback ?? null,
    sessions: st.sessions.map((s) => ({ ...s, timing: timings.get(s.session_id) ?? null })),
  };
}

function pickTiming(t: Record<string, unknown>): Record<string, number> {
  const keys = ["init_ms", "ready_queue_ms", "run_ms", "postrun_queue_ms", "postrun_ms", "eval_ms", "e2e_ms"];
  return Object.fromEntries(keys.map((k) => [k, Number(t[k] ?? 0)]));
}
