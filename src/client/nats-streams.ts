/**
 * Reading a task's results and traces from JetStream with replay: ordered
 * consumers (which recreate themselves from the last delivered sequence after
 * a reconnect), filtered to the task's subjects and to the sessions of this run
 * of the task (a finished task id may be reused), deduplicated by session,
 * attempt and trace index. The supervisor's HTTP stream uses the same readers.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { DeliverPolicy, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import { Objm, type ObjectStore } from "@nats-io/obj";
import { CONSUME_EXPIRES_MS } from "../nats/infra.ts";
import { readDurable } from "../nats/messages.ts";
import type { SessionResult } from "../protocol/schemas.ts";
import { BUCKETS, STREAMS, SUBJECTS } from "../protocol/subjects.ts";
import type { ResultMessage, StreamOptions, TraceMessage } from "./types.ts";

/** How often a traces reader re-checks, once every result is in, whether the last traces have been published. */
const RECHECK_MS = 200;

export class TaskStreams {
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  #jsm?: Promise<JetStreamManager>;
  #blobs?: Promise<ObjectStore>;

  constructor(nc: NatsConnection) {
    this.#nc = nc;
    this.#js = jetstream(nc);
  }

  #ctx() {
    this.#blobs ??= new Objm(this.#nc).open(BUCKETS.blobs);
    return this.#blobs.then((blobs) => ({ blobs }));
  }

  async #decode<T>(data: Uint8Array, headers: JsMsg["headers"]): Promise<T> {
    return (await readDurable(await this.#ctx(), data, headers)) as T;
  }

  /** The first result of each session of the run, in stream order; ends when every session has one. */
  async *results(taskId: string, sessionIds: readonly string[], opts: StreamOptions = {}): AsyncGenerator<ResultMessage> {
    const want = new Set(sessionIds);
    const seen = new Set<string>();
    if (want.size === 0) return;
    for await (const m of this.#read(STREAMS.results, SUBJECTS.result(taskId), opts)) {
      const r = await this.#decode<SessionResult>(m.data, m.headers);
      if (!want.has(r.session_id) || seen.has(r.session_id)) continue;
      seen.add(r.session_id);
      yield { ...r, seq: m.seq };
      if (seen.size === want.size) return;
    }
  }

  /**
   * Every trace of the run from `fromSeq` on, each once; ends when every
   * session has reported and all of its traces have been passed.
   */
  async *traces(taskId: string, sessionIds: readonly string[], opts: StreamOptions = {}): AsyncGenerator<TraceMessage> {
    const want = new Set(sessionIds);
    const ac = new AbortController();
    const stop = () => ac.abort(opts.signal?.reason);
    opts.signal?.addEventListener("abort", stop, { once: true });
    // Per session: trace count of its result (from POLAR_RESULTS), and the sequence of its last trace once known.
    const expected = new Map<string, number>();
    const lastSeq = new Map<string, number>();
    let wake: () => void = () => {};
    let woken = new Promise<void>((r) => (wake = r));
    let failure: unknown;
    const resultsDone = (async () => {
      for await (const r of this.results(taskId, sessionIds, { signal: ac.signal })) {
        expected.set(r.session_id, r.trajectory.traces.length);
        wake();
      }
    })().catch((err) => {
      if (!ac.signal.aborted) failure = err;
      wake();
    });
    const it = this.#read(STREAMS.traces, SUBJECTS.traceFilter(taskId), { fromSeq: opts.fromSeq, signal: ac.signal })[Symbol.asyncIterator]();
    let position = (opts.fromSeq ?? 1) - 1;
    const delivered = new Set<string>();
    let pending = it.next();
    try {
      let lookup = false;
      for (;;) {
        if (expected.size === want.size && (await this.#allPublished(taskId, expected, lastSeq, position, lookup))) return;
        lookup = false;
        const timer = expected.size === want.size ? sleep(RECHECK_MS) : new Promise<void>(() => {});
        const next = await Promise.race([
          pending.then((r) => ({ kind: "msg" as const, r })),
          woken.then(() => ({ kind: "wake" as const })),
          timer.then(() => ({ kind: "tick" as const })),
        ]);
        if (next.kind === "wake") {
          woken = new Promise<void>((r) => (wake = r));
          if (failure !== undefined) throw failure;
          continue;
        }
        if (next.kind === "tick") {
          lookup = true;
          continue;
        }
        if (next.r.done) {
          if (opts.signal?.aborted) return;
          throw new Error("the trace stream ended early");
        }
        pending = it.next();
        const m = next.r.value;
        position = Math.max(position, m.seq);
        const body = await this.#decode<Omit<TraceMessage, "seq">>(m.data, m.headers);
        if (!want.has(body.session_id)) continue;
        if (body.trace_index === body.trace_count - 1) lastSeq.set(body.session_id, m.seq);
        const key = `${body.session_id}:${body.attempt}:${body.trace_index}`;
        if (delivered.has(key)) continue;
        delivered.add(key);
        yield { ...body, seq: m.seq };
      }
    } finally {
      opts.signal?.removeEventListener("abort", stop);
      ac.abort();
      await it.return?.(undefined);
      await resultsDone;
    }
  }

  /**
   * True when every session's last trace sits at or before `position`. With
   * `lookup`, a session whose last trace was not read (it lies before
   * `fromSeq`, or is not published yet) is looked up directly by subject; a
   * lookup that fails (connection down) just answers "not yet".
   */
  async #allPublished(taskId: string, expected: Map<string, number>, lastSeq: Map<string, number>, position: number, lookup: boolean) {
    for (const [sessionId, count] of expected) {
      if (count === 0 || lastSeq.has(sessionId)) continue;
      if (!lookup) return false;
      try {
        this.#jsm ??= jetstreamManager(this.#nc, { checkAPI: false });
        const m = await (await this.#jsm).streams.getMessage(STREAMS.traces, { last_by_subj: SUBJECTS.trace(taskId, sessionId) });
        if (!m) return false;
        const body = await this.#decode<Omit<TraceMessage, "seq">>(m.data, m.header);
        if (body.trace_index !== body.trace_count - 1) return false;
        lastSeq.set(sessionId, m.seq);
      } catch {
        this.#jsm = undefined;
        return false; // not published yet (no message on the subject), or NATS unreachable: the next tick asks again
      }
    }
    for (const [sessionId, count] of expected) if (count > 0 && (lastSeq.get(sessionId) ?? Infinity) > position) return false;
    return true;
  }

  async *#read(stream: string, filter: string, opts: StreamOptions): AsyncGenerator<JsMsg> {
    const consumer = await this.#js.consumers.get(stream, {
      filter_subjects: filter, // one subject: nats-server 2.9 (Debian 12) has no multi-filter consumers
      ...(opts.fromSeq && opts.fromSeq > 1
        ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: opts.fromSeq }
        : { deliver_policy: DeliverPolicy.All }),
    });
    const messages = await consumer.consume({ max_messages: 64, expires: CONSUME_EXPIRES_MS });
    const close = () => void messages.close();
    if (opts.signal?.aborted) close();
    opts.signal?.addEventListener("abort", close, { once: true });
    try {
      for await (const m of messages) yield m;
    } finally {
      opts.signal?.removeEventListener("abort", close);
      await messages.close();
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref?.());
}
