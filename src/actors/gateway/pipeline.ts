/**
 * The stage pipeline of one gateway: INIT, RUNNING and POSTRUN are Stage
 * mailboxes (workers plus a bounded queue); READY is the RUNNING stage's
 * queue (sessions that finished INIT and wait for a RUN worker). A session is
 * pulled from the shared durable consumer only when every stage it will pass
 * through has room, POSTRUN included: a slow POSTRUN stops the pulling
 * instead of piling up sessions that each hold a live sandbox. A session
 * moving on to a full stage waits where it is (backpressure).
 *
 * While a session is held, its message is kept in progress (`working()`) and
 * its lease renewed; it is acked only after the SessionResult is durably
 * published, and that publish is retried through NATS outages (the session
 * is never re-run for it). Sessions are keyed by (session, attempt).
 */
import { JetStreamApiCodes, JetStreamApiError, type Consumer, type JsMsg } from "@nats-io/jetstream";
import type { Logger } from "pino";
import { publishDurable, readDurable } from "../../nats/messages.ts";
import { applyPolicyVersions } from "./policy-versions.ts";
import type { Infra } from "../../nats/infra.ts";
import { validate } from "../../protocol/codec.ts";
import { errorMessage } from "../../protocol/errors.ts";
import { SessionDispatch, type NodeStageMetrics, type SessionLease, type SessionResult } from "../../protocol/schemas.ts";
import { STREAMS, SUBJECTS } from "../../protocol/subjects.ts";
import type { GatewayContext } from "./context.ts";
import { acquireLease, newLeaseToken, releaseLease, renewLease } from "./lease.ts";
import { isMalformed, retrying } from "./retry.ts";
import { SessionAttempt } from "./session.ts";
import { Stage } from "./stage.ts";
import { evaluateWithActors } from "./remote-eval.ts";
import { sleep } from "../../util/abort.ts";
import { readTaskFlags, refusalOf } from "./task-flags.ts";

export interface StageLimits {
  maxInitWorkers: number;
  maxRunWorkers: number;
  maxPostrunWorkers: number;
  /** Sessions pulled that may wait for an INIT worker (default 0: pull only for a free worker). */
  initQueueCapacity: number;
  /** Sessions that finished INIT and wait for a RUN worker. */
  readyCapacity: number;
  /** Sessions whose agent finished that may wait for a POSTRUN worker. */
  postrunQueueCapacity: number;
  /** Interval of `working()` and lease renewal while a session is held (well below the consumer's ack_wait). */
  keepAliveMs: number;
  /** The consumer's ack_wait: how long a deferred delivery waits before it comes back. */
  ackWaitMs: number;
  /** A lease not renewed this long may be taken over by a newer attempt. */
  leaseStaleMs: number;
  /** How long a finished session's result publish is retried (through a NATS outage) before it is handed back. */
  publishRetryMs: number;
  /**
   * INIT and RUN share the RUNNING workers: a session takes a RUN worker
   * before its INIT and keeps it to the end of its agent run (no INIT pool,
   * no READY queue). Unstaged, as a single worker pool would run it; the
   * default (false) stages them.
   */
  sharedInitRun?: boolean;
}

/** One attempt held by this gateway, with the delivery it answers for and its lease. */
interface Held {
  session: SessionAttempt;
  msg: JsMsg;
  hold: Hold;
  lease?: SessionLease;
  revision: number;
  /** Set when another attempt took the lease: this one reports nothing. */
  lost: boolean;
}

interface Hold {
  release?: () => void;
}

/** A place taken in the first stage (INIT, or RUN when shared; a worker or a queue slot): `worker` resolves once a worker is this session's. */
interface FirstPlace {
  worker: Promise<() => void>;
  /** Gives the place back (whether it is still queued or already a worker; a no-op once released). */
  cancel(): void;
}

/** Takes a place in `stage` without waiting for its worker; rejects if `signal` aborts before a place is free. */
async function reserve(stage: Stage, signal: AbortSignal): Promise<FirstPlace> {
  const ctl = new AbortController();
  const stop = () => ctl.abort(signal.reason);
  signal.addEventListener("abort", stop, { once: true });
  let admitted!: () => void;
  const placed = new Promise<void>((r) => (admitted = r));
  const worker = stage.enter(ctl.signal, admitted);
  worker.catch(() => undefined); // awaited by the session (or given back by cancel)
  const cancel = () => {
    ctl.abort(new Error("place given back"));
    void worker.then(
      (release) => release(),
      () => undefined,
    );
  };
  try {
    await Promise.race([placed, worker]);
    return { worker, cancel };
  } catch (err) {
    cancel();
    throw err;
  } finally {
    signal.removeEventListener("abort", stop); // once placed, the session keeps its place while the gateway stops pulling
  }
}

export class Pipeline {
  readonly #init: Stage;
  readonly #run: Stage;
  readonly #post: Stage;
  /** Sessions whose POSTRUN waits for an evaluator actor, their POSTRUN worker released. */
  #evalWaiting = 0;
  /** Held attempts by `session_id\nattempt`. */
  readonly #held = new Map<string, Held>();
  readonly #inflight = new Set<Promise<void>>();
  /** When this gateway last (re)connected to NATS (ms since the epoch). */
  #calmSince = Date.now();
  /** Aborted when the gateway leaves: deliveries still waiting for their turn are handed back. */
  readonly #leaving = new AbortController();

  constructor(
    private readonly g: GatewayContext,
    private readonly infra: Infra,
    private readonly limits: StageLimits,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.#init = new Stage({ name: "INIT", workers: limits.maxInitWorkers, queue: limits.initQueueCapacity, whenFull: "wait" });
    this.#run = new Stage({ name: "RUNNING", workers: limits.maxRunWorkers, queue: limits.readyCapacity, whenFull: "wait" });
    this.#post = new Stage({ name: "POSTRUN", workers: limits.maxPostrunWorkers, queue: limits.postrunQueueCapacity, whenFull: "wait" });
  }

  metrics(): NodeStageMetrics {
    return {
      init_queue_depth: this.#init.depth,
      init_inflight: this.#init.inflight,
      ready_depth: this.#run.depth,
      run_inflight: this.#run.inflight,
      postrun_queue_depth: this.#post.depth,
      postrun_inflight: this.#post.inflight,
      eval_waiting: this.#evalWaiting,
    };
  }

  get size(): number {
    return this.#held.size;
  }

  /** The attempts of a session held here. */
  #attemptsOf(sessionId: string): Held[] {
    return [...this.#held.values()].filter((h) => h.session.id === sessionId);
  }

  /** Cancels every attempt of the session held here. */
  cancel(sessionId: string, reason?: string): boolean {
    const held = this.#attemptsOf(sessionId);
    for (const h of held) h.session.cancel(reason);
    return held.length > 0;
  }

  /**
   * Cancels every session; with `requeue` their messages go back to the queue
   * instead of an ERROR result. A session whose agent already finished is
   * left to finish POSTRUN and publish: requeueing it would waste its work.
   */
  cancelAll(reason: string, requeue = false): void {
    if (requeue) this.#leaving.abort(new Error(reason));
    for (const { session: s } of this.#held.values()) {
      if (requeue && s.agentDone) continue;
      s.requeue ||= requeue;
      s.cancel(reason);
    }
  }

  /** Pulls and runs sessions until the signal aborts; then waits for nothing (see `settle`). */
  async pullLoop(consumer: Consumer, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let place: FirstPlace | undefined;
      try {
        const shared = this.limits.sharedInitRun === true;
        await Stage.room(shared ? [this.#run, this.#post] : [this.#init, this.#run, this.#post], signal);
        // The first place (INIT, or RUN when shared) is taken before the pull, so the gate holds while the session is decoded and leased.
        place = await reserve(shared ? this.#run : this.#init, signal);
        const msg = await consumer.next({ expires: 1000 });
        if (!msg) {
          place.cancel();
          continue;
        }
        if (signal.aborted) {
          place.cancel();
          msg.nak();
          break;
        }
        const p = this.#launch(msg, place).catch((err) => this.log.error({ err }, "session pipeline failed"));
        place = undefined;
        this.#inflight.add(p);
        void p.finally(() => this.#inflight.delete(p));
      } catch (err) {
        place?.cancel();
        if (signal.aborted) break;
        this.log.warn({ err: errorMessage(err) }, "pull failed; retrying");
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** Resolves when every session in flight has finished. */
  async settle(): Promise<void> {
    while (this.#inflight.size) await Promise.allSettled([...this.#inflight]);
  }

  /** Runs one delivery; `place` is its place in INIT, given back whatever happens. */
  async #launch(msg: JsMsg, place: FirstPlace): Promise<void> {
    const dispatch = await this.#decode(msg);
    if (!dispatch || this.#pastQueueDeadline(dispatch, msg)) return place.cancel();
    const attempt = msg.info.deliveryCount;
    const key = `${dispatch.session_id}\n${attempt}`;
    /** The stage worker the session holds (POSTRUN lets go of it while an evaluator actor works). */
    const hold: Hold = {};
    const session = new SessionAttempt(dispatch, attempt, this.g, {
      evaluate: evaluateWithActors((p) => this.#awayFromPostrun(hold, p)),
      remoteEvaluation: this.g.remoteEval !== undefined,
    });
    const h: Held = { session, msg, hold, revision: 0, lost: false };
    let renewing = false;
    const keepAlive = setInterval(() => {
      msg.working();
      if (renewing || !h.lease) return;
      renewing = true;
      void this.#renew(h).finally(() => (renewing = false));
    }, this.limits.keepAliveMs);
    keepAlive.unref();
    try {
      if (!(await this.#waitTurn(h))) return; // another attempt answers for the message
      this.#held.set(key, h);
      const result = await this.#stages(h, place);
      if (h.lost) return; // another attempt took the session: it answers for the message
      if (session.requeue) {
        await this.#handBack(h);
        return;
      }
      applyPolicyVersions(result, this.g.policyVersion(), session.dispatch.max_policy_lag);
      await this.#publish(result);
      msg.ack();
    } catch (err) {
      // Not published: hand the message back so any gateway may run it again.
      this.log.error({ err: errorMessage(err), session_id: session.id, attempt }, "session result could not be published; it will be redelivered");
      await this.#handBack(h, 1000);
    } finally {
      place.cancel(); // a no-op once #stages moved on from INIT
      clearInterval(keepAlive);
      if (this.#held.get(key) === h) this.#held.delete(key);
    }
  }

  /**
   * Waits until this attempt may run the session: no older attempt of it runs
   * here, and it holds the session's lease. While it waits, its delivery is
   * kept in progress (no redelivery is spent). False: it must not run (a newer
   * attempt holds the session, or the message was acked by the attempt that ran it).
   */
  async #waitTurn(h: Held): Promise<boolean> {
    const s = h.session;
    for (let waited = false; ; waited = true) {
      if (waited) {
        await sleep(Math.min(1000, this.limits.keepAliveMs), this.#leaving.signal).catch(() => undefined);
        if (this.#leaving.signal.aborted) {
          h.msg.nak();
          return false;
        }
        if (!(await this.#stillQueued(h.msg))) return false;
      }
      if (this.#attemptsOf(s.id).length) {
        if (!waited) this.log.warn({ session_id: s.id, attempt: s.attempt }, "session redelivered while an older attempt runs here; waiting for it");
        continue;
      }
      const got = await this.#takeLease(h);
      if (got === "held") return true;
      if (got === "superseded") return false;
      if (got === "finished") {
        h.msg.ack(); // the session's result is recorded: this delivery is spent, never run again
        return false;
      }
    }
  }

  /** Whether the dispatch message is still in the work queue (it is removed once acked). */
  async #stillQueued(msg: JsMsg): Promise<boolean> {
    try {
      // nats.js answers a message that is not there with null (it throws for other failures).
      return (await this.infra.jsm.streams.getMessage(STREAMS.sessions, { seq: msg.seq })) !== null;
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.NoMessageFound) return false;
      return true; // unknown (NATS unavailable): keep waiting
    }
  }

  /** Lets the lease go and naks the message, so the next attempt may start at once (or after `delayMs`). */
  async #handBack(h: Held, delayMs?: number): Promise<void> {
    if (h.lease) {
      await releaseLease(this.infra.leases, h.lease).catch((err) => this.log.warn({ err: errorMessage(err) }, "could not release a lease; it expires with its node"));
    }
    h.msg.nak(delayMs);
  }

  async #renew(h: Held): Promise<void> {
    try {
      const r = await renewLease(this.infra.leases, h.lease!, h.revision, new Date());
      if (r.kind === "renewed") {
        h.revision = r.revision;
        return;
      }
      h.lost = true;
      const by = r.by ? `attempt ${r.by.attempt} on ${r.by.node_id}` : "its expiry (the node was taken for gone)";
      this.log.warn({ session_id: h.session.id, attempt: h.session.attempt, by }, "lease lost; cancelling this attempt");
      h.session.cancel(`lease lost to ${by}`);
    } catch (err) {
      // A KV outage: the lease stays ours; the next tick tries again.
      this.log.debug({ err: errorMessage(err) }, "lease renewal failed; retrying");
    }
  }

  /** Takes the session's lease as the attempt starts (its INIT time). */
  async #takeLease(h: Held): Promise<"held" | "busy" | "superseded" | "finished"> {
    const s = h.session;
    const { token, sha256 } = newLeaseToken();
    const got = await retrying(
      () =>
        acquireLease(
          this.infra.leases,
          {
            sessionId: s.id,
            taskId: s.dispatch.task_id,
            attempt: s.attempt,
            nodeId: this.g.nodeId,
            budgetSeconds: s.dispatch.remaining_timeout_seconds,
            tokenSha256: sha256,
            ackSubject: (h.msg as JsMsg & { reply?: string }).reply || undefined,
            now: new Date(),
            calmSince: this.#calmSince,
          },
          this.limits.leaseStaleMs,
          // This node runs no other attempt of the session (checked first): its own older lease is left over.
          (l) => l.node_id === this.g.nodeId,
        ),
      { what: "lease", deadlineMs: 30_000, onRetry: (err) => this.log.warn({ err: errorMessage(err) }, "lease write failed; retrying") },
    );
    if (got.kind === "held") {
      h.lease = got.lease;
      h.revision = got.revision;
      s.leaseToken = token;
    } else if (got.kind === "busy") {
      this.log.debug({ session_id: s.id, attempt: s.attempt, holder: `${got.by.node_id} attempt ${got.by.attempt}` }, "session held by a live older attempt; waiting");
    } else if (got.kind === "finished") {
      this.log.info({ session_id: s.id, attempt: s.attempt, finished_at: got.by.finished_at }, "session already finished; dropping this delivery");
    } else {
      this.log.warn({ session_id: s.id, attempt: s.attempt, newer: got.by.attempt }, "a newer attempt holds this session; dropping this one");
    }
    return got.kind;
  }

  /** NATS came back after an outage: leases not renewed during it are not taken for abandoned ones. */
  reconnected(): void {
    this.#calmSince = Date.now();
  }

  /**
   * INIT, READY, RUNNING, POSTRUN. A session lets go of a stage only once it
   * has its place in the next one, so a full stage holds the sessions behind
   * it where they are. A session that failed or was cancelled goes straight
   * to POSTRUN (which tears it down and reports).
   */
  async #stages(h: Held, place: FirstPlace): Promise<SessionResult> {
    const { session, hold } = h;
    const shared = this.limits.sharedInitRun === true;
    hold.release = await place.worker; // an INIT worker, or the RUN worker taken before INIT when shared
    /** Lets go of the current stage: called once the session has its place in the next one. */
    const handOff = () => {
      const r = hold.release;
      hold.release = undefined;
      r?.();
    };
    try {
      const refused = await this.#taskRefusal(session.dispatch.task_id);
      if (refused) session.cancel(refused);
      if (!session.abort.signal.aborted) await session.init();
      if (!session.failed && shared) await session.run(); // the RUN worker taken before INIT
      else if (!session.failed) {
        const releaseRun = await this.#run.enter(session.abort.signal, handOff).catch(() => undefined); // cancelled while READY: POSTRUN reports it
        if (releaseRun) {
          hold.release = releaseRun;
          await session.run();
        }
      }
      const releasePost = await this.#post.enter(undefined, handOff);
      hold.release = releasePost;
      return await session.postrun();
    } finally {
      handOff();
    }
  }

  /**
   * Awaits `p` (an evaluator actor's answer) with the session's POSTRUN worker
   * released for other sessions, then takes a POSTRUN worker again.
   */
  async #awayFromPostrun<T>(hold: Hold, p: Promise<T>): Promise<T> {
    const release = hold.release;
    if (!release) return p;
    hold.release = undefined;
    release();
    this.#evalWaiting++;
    try {
      return await p;
    } finally {
      this.#evalWaiting--;
      hold.release = await this.#post.enter();
    }
  }

  async #decode(msg: JsMsg): Promise<SessionDispatch | undefined> {
    try {
      const body = await retrying(() => readDurable(this.infra, msg.data, msg.headers), {
        what: "dispatch body",
        deadlineMs: 5000,
        onRetry: (err) => this.log.warn({ err: errorMessage(err), seq: msg.seq }, "reading a dispatch failed; retrying"),
      });
      return validate(SessionDispatch, body, "session dispatch");
    } catch (err) {
      if (isMalformed(err)) {
        // A malformed dispatch can never run: drop it (term) so it is not redelivered forever.
        this.log.error({ err: errorMessage(err), seq: msg.seq }, "dropping a malformed session dispatch");
        msg.term();
      } else {
        // The object store or NATS is unavailable: the dispatch is fine, try it again later.
        this.log.warn({ err: errorMessage(err), seq: msg.seq }, "could not read a session dispatch; handing it back");
        msg.nak(1000);
      }
      return undefined;
    }
  }

  /**
   * A first delivery pulled after its `queue_timeout_seconds` ran out is not
   * started (the supervisor records its TIMEOUT): dropped from the queue. A
   * redelivery is an attempt that did start, which its session budget governs.
   */
  #pastQueueDeadline(d: SessionDispatch, msg: JsMsg): boolean {
    if (!d.queue_deadline_at || msg.info.deliveryCount > 1 || this.now() <= Date.parse(d.queue_deadline_at)) return false;
    this.log.warn({ session_id: d.session_id, queue_deadline_at: d.queue_deadline_at }, "not starting a session pulled after its queue_timeout_seconds");
    msg.term();
    return true;
  }

  /** Why a session of this task must not start (cancelled or early-stopped task), or null. */
  async #taskRefusal(taskId: string): Promise<string | null> {
    try {
      const flags = await retrying(() => readTaskFlags(this.infra.taskFlags, taskId), { what: "task flags", deadlineMs: 3000 });
      return refusalOf(flags);
    } catch (err) {
      // Unknown: run it (a cancel still reaches it over polar.session.cancel.*).
      this.log.warn({ err: errorMessage(err), task_id: taskId }, "could not read the task's flags; running the session");
      return null;
    }
  }

  /** Publishes the result, retried with backoff through a NATS outage (deduplicated by session and attempt). */
  async #publish(result: SessionResult): Promise<void> {
    await retrying(() => publishDurable(this.infra, SUBJECTS.result(result.task_id), result, `${result.session_id}:${result.attempt}`), {
      what: "session result",
      deadlineMs: this.limits.publishRetryMs,
      onRetry: (err, n) => this.log.warn({ err: errorMessage(err), session_id: result.session_id, retry: n }, "publishing a session result failed; retrying"),
    });
  }
}
