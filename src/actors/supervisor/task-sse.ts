/**
 * `GET /rollout/task/{id}/traces` and `GET /rollout/task/{id}/results`: a
 * task's traces (or results) as server-sent events, replayed from the start
 * of the streams (or from `?from_seq=N` / `Last-Event-ID` + 1), then live,
 * ending with `event: end` once every session has reported and all its traces
 * were sent. Each event's id is its stream sequence. Trainers that cannot use
 * NATS follow a task with nothing but HTTP.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { TaskStreams } from "../../client/nats-streams.ts";
import { toWireError, ValidationError } from "../../protocol/errors.ts";
import { sendError } from "../../util/http.ts";
import type { TaskService } from "./tasks.ts";

export type TaskStreamKind = "traces" | "results";

export async function streamTaskSse(
  kind: TaskStreamKind,
  taskId: string,
  deps: { tasks: TaskService; nc: NatsConnection; log: Logger },
  url: URL,
  req: IncomingMessage,
  res: ServerResponse,
  heartbeatMs = 15_000,
): Promise<void> {
  let fromSeq: number;
  let sessionIds: string[];
  try {
    fromSeq = startSeq(url, req);
    sessionIds = (await deps.tasks.get({ task_id: taskId })).sessions.map((s) => s.session_id);
  } catch (err) {
    return sendError(res, err);
  }
  const ac = new AbortController();
  res.once("close", () => ac.abort());
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" });
  res.write(`: polar task ${kind}\n\n`);
  const beat = setInterval(() => res.write(": keep-alive\n\n"), heartbeatMs);
  beat.unref();
  const streams = new TaskStreams(deps.nc);
  const event = kind === "traces" ? "trace" : "result";
  try {
    const source = kind === "traces" ? streams.traces(taskId, sessionIds, { fromSeq, signal: ac.signal }) : streams.results(taskId, sessionIds, { fromSeq, signal: ac.signal });
    for await (const m of source) {
      if (!res.write(`id: ${m.seq}\nevent: ${event}\ndata: ${JSON.stringify(m)}\n\n`)) await drained(res, ac.signal);
      if (ac.signal.aborted) return;
    }
    res.write(`event: end\ndata: ${JSON.stringify({ task_id: taskId })}\n\n`);
  } catch (err) {
    if (ac.signal.aborted) return;
    deps.log.warn({ err, task_id: taskId, kind }, "task event stream failed");
    res.write(`event: error\ndata: ${JSON.stringify(toWireError(err))}\n\n`);
  } finally {
    clearInterval(beat);
    res.end();
  }
}

/** `?from_seq=N`, else the `Last-Event-ID` header + 1, else the start. */
function startSeq(url: URL, req: IncomingMessage): number {
  const q = url.searchParams.get("from_seq");
  const last = req.headers["last-event-id"];
  const raw = q ?? (typeof last === "string" && last ? String(Number(last) + 1) : "1");
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new ValidationError("stream position", [{ path: q != null ? "from_seq" : "Last-Event-ID", message: "must be a non-negative integer" }]);
  }
  return Math.max(1, n);
}

function drained(res: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    res.once("drain", done);
    signal.addEventListener("abort", done, { once: true });
  });
}
