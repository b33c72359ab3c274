/**
 * The client's paged status read (`readAllSessions`) over an in-process
 * transport that answers status pages like the supervisor: every page in
 * order, a resubmission between two pages, and malformed pages. The real
 * system's pages are covered by client.test.ts.
 */
import { describe, expect, it } from "vitest";
import { PolarError } from "../src/protocol/errors.ts";
import { SessionSummary, TaskStatus } from "../src/protocol/schemas.ts";
import { readAllSessions, statusPageSize } from "../src/client/status-pages.ts";
import type { StatusPage, Transport } from "../src/client/transport.ts";

function run(total: number, createdAt: string): TaskStatus {
  const sessions = Array.from({ length: total }, (_, i) =>
    SessionSummary.parse({ session_id: `${createdAt}-s${i}`, sample_index: i, status: "COMPLETED" }),
  );
  return TaskStatus.parse({ task_id: "t", status: "completed", total_sessions: total, completed_sessions: total, sessions, created_at: createdAt });
}

/** Answers pages of `runs[k]` for the k-th request (the last run from then on), like the supervisor's offset/limit. */
function pagedTransport(runs: TaskStatus[], mangle: (page: TaskStatus, req: StatusPage) => TaskStatus = (p) => p) {
  const requests: StatusPage[] = [];
  const t = {
    statusPageSize: 3,
    async get(_taskId: string, page?: StatusPage) {
      const req = page ?? { offset: 0, limit: 1000 };
      const st = runs[Math.min(requests.length, runs.length - 1)];
      requests.push(req);
      const sessions = st.sessions.slice(req.offset, req.offset + req.limit);
      return mangle({ ...st, sessions, offset: req.offset, limit: req.limit }, req);
    },
  } as unknown as Transport;
  return { t, requests };
}

describe("readAllSessions", () => {
  it("reads page after page until it holds every session, in sample order", async () => {
    const { t, requests } = pagedTransport([run(8, "r1")]);
    const st = await readAllSessions(t, "t", { pageSize: 3 });
    expect(st.sessions.map((s) => s.sample_index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect([st.offset, st.limit, st.total_sessions]).toEqual([0, 8, 8]);
    expect(requests).toEqual([{ offset: 0, limit: 3 }, { offset: 3, limit: 3 }, { offset: 6, limit: 3 }]);
  });

  it("continues after a first page of another size (a cancel reply), and a task without sessions needs one request", async () => {
    const { t, requests } = pagedTransport([run(5, "r1")]);
    const first = await t.get("t", { offset: 0, limit: 4 });
    const st = await readAllSessions(t, "t", { pageSize: 3, first });
    expect(st.sessions.map((s) => s.session_id)).toEqual(["r1-s0", "r1-s1", "r1-s2", "r1-s3", "r1-s4"]);
    expect(requests).toEqual([{ offset: 0, limit: 4 }, { offset: 4, limit: 3 }]);
    const empty = pagedTransport([run(0, "r0")]);
    expect((await readAllSessions(empty.t, "t", { pageSize: 3 })).sessions).toEqual([]);
    expect(empty.requests).toHaveLength(1);
  });

  it("starts over when the task id is resubmitted between two pages: sessions of one run only", async () => {
    // Request 1 sees run r1, request 2 already the new run r2 (different created_at and size).
    const { t, requests } = pagedTransport([run(5, "r1"), run(4, "r2")]);
    const st = await readAllSessions(t, "t", { pageSize: 3 });
    expect(st.created_at).toBe("r2");
    expect(st.sessions.map((s) => s.session_id)).toEqual(["r2-s0", "r2-s1", "r2-s2", "r2-s3"]);
    expect(requests.map((r) => r.offset)).toEqual([0, 3, 0, 3]);
  });

  it("gives up with a conflict when every read sees a new run", async () => {
    const runs = Array.from({ length: 12 }, (_, k) => run(5, `r${k}`));
    const { t } = pagedTransport(runs);
    const err = await readAllSessions(t, "t", { pageSize: 3 }).catch((e) => e);
    expect(err).toBeInstanceOf(PolarError);
    expect(err.code).toBe("conflict");
  });

  it("an empty page before the last session, or a sample out of place, is a typed internal error, not a loop", async () => {
    const short = pagedTransport([run(5, "r1")], (p, req) => (req.offset >= 3 ? { ...p, sessions: [] } : p));
    const e1 = await readAllSessions(short.t, "t", { pageSize: 3 }).catch((e) => e);
    expect([e1.code, e1.message]).toEqual(["internal", "the status of task t has no sessions from offset 3 of 5"]);
    const dup = pagedTransport([run(5, "r1")], (p, req) => (req.offset === 3 ? { ...p, sessions: [p.sessions[0], p.sessions[0]] } : p));
    const e2 = await readAllSessions(dup.t, "t", { pageSize: 3 }).catch((e) => e);
    expect(e2.code).toBe("internal");
    expect(e2.details).toEqual({ task_id: "t", position: 4, sample_index: 3 });
  });

  it("an aborted read stops before the next page", async () => {
    const { t, requests } = pagedTransport([run(9, "r1")]);
    const ac = new AbortController();
    const first = await t.get("t", { offset: 0, limit: 3 });
    ac.abort();
    await expect(readAllSessions(t, "t", { pageSize: 3, first, signal: ac.signal })).rejects.toThrow();
    expect(requests).toHaveLength(1);
  });

  it("statusPageSize: 1000 by default, integers in [1, 10000] only", () => {
    expect(statusPageSize(undefined)).toBe(1000);
    expect(statusPageSize(1)).toBe(1);
    expect(statusPageSize(10_000)).toBe(10_000);
    for (const bad of [0, -1, 10_001, 1.5, Number.NaN]) expect(() => statusPageSize(bad)).toThrow(/statusPageSize must be an integer/);
  });
});
