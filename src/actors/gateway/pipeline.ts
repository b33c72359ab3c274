/**
 * The stage pipeline of one gateway: INIT, RUNNING and POSTRUN are Stage
 * mailboxes (workers plus a bounded queue); READY is the RUNNING stage's
 * queue (sessions that finished INIT and wait for a RUN worker). A session is
 * pulled from the shared durable consumer only when every stage it will pass
 * through has room, POSTRUN included: a slow POSTRUN stops the pulling
 * instead of piling up sessions that each hold a live sandbox. A session
 * moving on to a full stage waits where it is (backpressure). While a session
 * is held, its message is kept in progress (`working()`); it is acked only
 * after the SessionResult is durably published.
 */
import type { Consumer, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "pino";
import { publishDurable, readDurable } from "../../nats/messages.ts";
import { applyPolicyVersions } from "./policy-versions.ts";
import type { Infra } from "../../nats/infra.ts";
import { validate } from "../../protocol/codec.ts";
import { errorMessage } from "../../protocol/errors.ts";
import { SessionDispatch, type NodeStageMetrics, type SessionResult } from "../../protocol/schemas.ts";
import { SUBJECTS } from "../../protocol/subjects.ts";
import type { TaskStore } from "../supervisor/task-store.ts";
import type { GatewayContext } from "./context.ts";
import { SessionAttempt } from "./session.ts";
import { Stage } from "./stage.ts";
import { evaluateWithActors } from "./remote-eval.ts";

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
  /** Interval of `working()` while a session is held (well below the consumer's ack_wait). */
  keepAliveMs: number;
  /**
   * INIT and RUN share the RUNNING workers: a session takes a RUN worker
   * before its INIT and keeps it to the end of its agent run (no INIT pool,
   * no READY queue). Unstaged, as a single worker pool would run it; the
   * default (false) stages them.
   */
  sharedInitRun?: boolean;
}

interface Hold {
  release?: () => void;
}

export class Pipeline {
  readonly #init: Stage;
  readonly #run: Stage;
  readonly #post: Stage;
  /** Sessions whose POSTRUN waits for an evaluator actor, their POSTRUN worker released. */
  #evalWaiting = 0;
  readonly #sessions = new Map<string, SessionAttempt>();
  readonly #inflight = new Set<Promise<void>>();

  constructor(
    private readonly g: GatewayContext,
    private readonly infra: Infra,
    private readonly tasks: TaskStore,
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
    return this.#sessions.size;
  }

  cancel(sessionId: string, reason?: string): boolean {
    const s = this.#sessions.get(sessionId);
    s?.cancel(reason);
    return !!s;
  }

  /** Cancels every session; with `requeue` their messages go back to the queue instead of an ERROR result. */
  cancelAll(reason: string, requeue = false): void {
    for (const s of this.#sessions.values()) {
      s.requeue ||= requeue;
      s.cancel(reason);
    }
  }

  /** Pulls and runs sessions until the signal aborts; then waits for nothing (see `settle`). */
  async pullLoop(consumer: Consumer, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await Stage.room(this.limits.sharedInitRun ? [this.#run, this.#post] : [this.#init, this.#run, this.#post], signal);
        const msg = await consumer.next({ expires: 1000 });
        if (!msg) continue;
        if (signal.aborted) {
          msg.nak();
          break;
        }
        const p = this.#launch(msg).catch((err) => this.log.error({ err }, "session pipeline failed"));
        this.#inflight.add(p);
        void p.finally(() => this.#inflight.delete(p));
      } catch (err) {
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

  async #launch(msg: JsMsg): Promise<void> {
    const keepAlive = setInterval(() => msg.working(), this.limits.keepAliveMs);
    keepAlive.unref();
    try {
      const dispatch = await this.#decode(msg);
      if (!dispatch || this.#pastQueueDeadline(dispatch, msg)) return;
      /** The stage worker the session holds (POSTRUN lets go of it while an evaluator actor works). */
      const hold: Hold = {};
      const session = new SessionAttempt(dispatch, msg.info.deliveryCount, this.g, {
        evaluate: evaluateWithActors((p) => this.#awayFromPostrun(hold, p)),
        remoteEvaluation: this.g.remoteEval !== undefined,
      });
      this.#sessions.set(session.id, session);
      try {
        const result = await this.#stages(session, hold);
        if (session.requeue) {
          msg.nak();
          return;
        }
        applyPolicyVersions(result, this.g.policyVersion(), session.dispatch.max_policy_lag);
        await this.#publish(result);
        msg.ack();
      } finally {
        this.#sessions.delete(session.id);
      }
    } catch (err) {
      // Not published: leave the message to be redelivered to any gateway.
      this.log.error({ err: errorMessage(err) }, "session result could not be published; it will be redelivered");
      msg.nak(1000);
    } finally {
      clearInterval(keepAlive);
    }
  }

  /**
   * INIT, READY, RUNNING, POSTRUN. A session lets go of a stage only once it
   * has its place in the next one, so a full stage holds the sessions behind
   * it where they are. A session that failed or was cancelled goes straight to POSTRUN
   * (which tears it down and reports).
   */
  async #stages(session: SessionAttempt, hold: Hold): Promise<SessionResult> {
    const shared = this.limits.sharedInitRun === true;
    hold.release = await (shared ? this.#run : this.#init).enter();
    /** Lets go of the current stage: called once the session has its place in the next one. */
    const handOff = () => {
      const h = hold.release;
      hold.release = undefined;
      h?.();
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
      return validate(SessionDispatch, await readDurable(this.infra, msg.data, msg.headers), "session dispatch");
    } catch (err) {
      // A malformed dispatch can never run: drop it (term) so it is not redelivered forever.
      this.log.error({ err: errorMessage(err), seq: msg.seq }, "dropping a malformed session dispatch");
      msg.term();
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
      const rec = await this.tasks.get(taskId);
      if (rec?.status === "cancelling" || rec?.status === "cancelled") return "session cancelled";
      if (rec?.early_stopped_at) return "early stop: the task already has enough usable sessions";
      return null;
    } catch {
      return null;
    }
  }

  async #publish(result: SessionResult): Promise<void> {
    await publishDurable(this.infra, SUBJECTS.result(result.task_id), result, `${result.session_id}:${result.attempt}`);
  }
}

