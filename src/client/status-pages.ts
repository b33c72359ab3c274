/**
 * A task's whole status from the paged status API: the session summaries come
 * one page at a time (`offset`/`limit`, at most 10,000 per page, 1,000 by
 * default), so the client reads pages until it holds every session of the run.
 */
import { PolarError } from "../protocol/errors.ts";
import { LIMITS, type SessionSummary, type TaskStatus } from "../protocol/schemas.ts";
import type { Transport } from "./transport.ts";

/** Session summaries per status request unless the client is told otherwise. */
export const DEFAULT_STATUS_PAGE_SIZE = 1000;
/** Reads restarted because the task id was resubmitted (a new run) between two pages. */
const MAX_RESTARTS = 3;

/** Checks a `statusPageSize` option: an integer in [1, 10,000] (the API's page bound). */
export function statusPageSize(value: number | undefined): number {
  if (value === undefined) return DEFAULT_STATUS_PAGE_SIZE;
  if (!Number.isInteger(value) || value < 1 || value > LIMITS.num_samples) {
    throw new PolarError("validation", `statusPageSize must be an integer in [1, ${LIMITS.num_samples}], got ${value}`, {
      details: { issues: [{ path: "statusPageSize", message: `must be an integer in [1, ${LIMITS.num_samples}]` }] },
    });
  }
  return value;
}

/**
 * The task's status with every session summary, in sample order: `first` (a
 * page already read, e.g. the one that showed the task final) and then the
 * following pages. Pages of one run only: when the task id is resubmitted
 * while reading, the read starts over. For a running task the pages are read
 * one after the other, not as one snapshot.
 */
export async function readAllSessions(
  t: Transport,
  taskId: string,
  opts: { pageSize: number; first?: TaskStatus; signal?: AbortSignal },
): Promise<TaskStatus> {
  let first = opts.first;
  for (let attempt = 0; attempt <= MAX_RESTARTS; attempt++) {
    opts.signal?.throwIfAborted();
    first ??= await t.get(taskId, { offset: 0, limit: opts.pageSize });
    const sessions = await restOfRun(t, taskId, first, opts);
    if (sessions) return { ...first, sessions, offset: 0, limit: sessions.length };
    first = undefined;
  }
  throw new PolarError("conflict", `task ${taskId} was resubmitted ${MAX_RESTARTS + 1} times while its sessions were read`, {
    details: { task_id: taskId },
  });
}

/** `first`'s sessions plus the following pages of the same run; undefined when the run changed. */
async function restOfRun(
  t: Transport,
  taskId: string,
  first: TaskStatus,
  opts: { pageSize: number; signal?: AbortSignal },
): Promise<SessionSummary[] | undefined> {
  const offset0 = first.offset ?? 0;
  if (offset0 !== 0) throw new PolarError("internal", `the first status page of task ${taskId} starts at offset ${offset0}, not 0`);
  const sessions = [...first.sessions];
  while (sessions.length < first.total_sessions) {
    opts.signal?.throwIfAborted();
    const page = await t.get(taskId, { offset: sessions.length, limit: opts.pageSize });
    if (page.created_at !== first.created_at || page.total_sessions !== first.total_sessions) return undefined;
    if (page.sessions.length === 0) {
      throw new PolarError("internal", `the status of task ${taskId} has no sessions from offset ${sessions.length} of ${first.total_sessions}`);
    }
    sessions.push(...page.sessions);
  }
  // Each sample index exactly once, in order (the API pages by sample index).
  sessions.forEach((s, i) => {
    if (s.sample_index !== i) {
      throw new PolarError("internal", `the status of task ${taskId} has sample ${s.sample_index} at position ${i}`, {
        details: { task_id: taskId, position: i, sample_index: s.sample_index },
      });
    }
  });
  if (sessions.length !== first.total_sessions) {
    throw new PolarError("internal", `the status of task ${taskId} lists ${sessions.length} sessions, not ${first.total_sessions}`);
  }
  return sessions;
}
