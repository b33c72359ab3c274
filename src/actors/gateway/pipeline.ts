/**
 * The stage pipeline of one gateway: INIT, READY, RUNNING and POSTRUN are
 * bounded (worker semaphores, a READY buffer with a capacity). A session is
 * pulled from the shared durable consumer only when INIT has a free worker
 * and READY has room — backpressure is the dispatch mechanism. While a
 * session is held, its message is kept in progress (`working()`); it is
 * acked only after the SessionResult is durably published.
 */
import type { Consumer, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "pino";
import { publishDurable, readDurable } from "../../nats/messages.ts";
import type { Infra } from "../../nats/infra.ts";
import { validate } from "../../protocol/codec.ts";
import { errorMessage } from "../../protocol/errors.ts";
import { SessionDispatch, type NodeStageMetrics, type SessionResult } from "../../protocol/schemas.ts";
import { SUBJECTS } from "../../protocol/subjects.ts";
import { Semaphore } from "../../util/abort.ts";
import type { TaskStore } from "../supervisor/task-store.ts";
import type { GatewayContext } from "./context.ts";
import { SessionAttempt } from "./session.ts";

export interface StageLimits {
  maxInitWorkers: number;
  maxRunWorkers: number;
  maxPostrunWorkers: number;
  /** Sessions that finished INIT and wait for a RUN worker. */
  readyCapacity: number;
  /** Interval of `working()` while a session is held (well below the consumer's ack_wait). */
  keepAliveMs: number;
}

export class Pipeline {
  readonly #init: Semaphore;
  readonly #run: Semaphore;
  readonly #post: Semaphore;
  readonly #sessions = new Map<string, SessionAttempt>();
  readonly #inflight = new Set<Promise<void>>();
  #ready = 0;
  #readyWaiters: Array<() => void> = [];
  #counts = { init: 0, run: 0, post: 0, postQueued: 0 };

  constructor(
    private readonly g: GatewayContext,
    private readonly infra: Infra,
    private readonly tasks: TaskStore,
    private readonly limits: StageLimits,
    private readonly log: Logger,
  ) {
    this.#init = new Semaphore(limits.maxInitWorkers);
    this.#run = new Semaphore(limits.maxRunWorkers);
    this.#post = new Semaphore(limits.maxPostrunWorkers);
  }

  metrics(): NodeStageMetrics {
    return {
      init_queue_depth: 0,
      init_inflight: this.#counts.init,
      ready_depth: this.#ready,
      run_inflight: this.#counts.run,
      postrun_queue_depth: this.#counts.postQueued,
      postrun_inflight: this.#counts.post,
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
    const wake = () => this.#readyWaiters.splice(0).forEach((w) => w());
    signal.addEventListener("abort", wake, { once: true });
    try {
      await this.#pull(consumer, signal);
    } finally {
      signal.removeEventListener("abort", wake);
    }
  }

  async #pull(consumer: Consumer, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let release: (() => void) | undefined;
      try {
        release = await this.#init.acquire(signal);
        await this.#readyRoom(signal);
        if (signal.aborted) {
          release();
          break;
        }
        const msg = await consumer.next({ expires: 1000 });
        if (!msg) {
          release();
          continue;
        }
        if (signal.aborted) {
          msg.nak();
          release();
          break;
        }
        const p = this.#launch(msg, release).catch((err) => this.log.error({ err }, "session pipeline failed"));
        this.#inflight.add(p);
        void p.finally(() => this.#inflight.delete(p));
      } catch (err) {
        release?.();
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

  async #readyRoom(signal: AbortSignal): Promise<void> {
    while (this.#ready >= this.limits.readyCapacity && !signal.aborted) {
      await new Promise<void>((r) => this.#readyWaiters.push(r));
    }
  }

  #readyChanged(delta: number): void {
    this.#ready += delta;
    if (delta < 0) this.#readyWaiters.splice(0).forEach((w) => w());
  }

  async #launch(msg: JsMsg, releaseInit: () => void): Promise<void> {
    const keepAlive = setInterval(() => msg.working(), this.limits.keepAliveMs);
    keepAlive.unref();
    try {
      const dispatch = await this.#decode(msg);
      if (!dispatch) {
        releaseInit();
        return;
      }
      const session = new SessionAttempt(dispatch, msg.info.deliveryCount, this.g);
      this.#sessions.set(session.id, session);
      try {
        await this.#stages(session, releaseInit);
        const result = await this.#postrun(session);
        if (session.requeue) {
          msg.nak();
          return;
        }
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

  async #stages(session: SessionAttempt, releaseInit: () => void): Promise<void> {
    const refused = await this.#taskRefusal(session.dispatch.task_id);
    if (refused) session.cancel(refused);
    this.#counts.init++;
    try {
      if (!session.abort.signal.aborted) await session.init();
    } finally {
      this.#counts.init--;
      releaseInit();
    }
    if (session.failed) return;
    this.#readyChanged(1);
    let releaseRun: () => void;
    try {
      releaseRun = await this.#run.acquire(session.abort.signal);
    } catch {
      return; // cancelled while READY
    } finally {
      this.#readyChanged(-1);
    }
    this.#counts.run++;
    try {
      await session.run();
    } finally {
      this.#counts.run--;
      releaseRun();
    }
  }

  async #postrun(session: SessionAttempt): Promise<SessionResult> {
    this.#counts.postQueued++;
    const release = await this.#post.acquire();
    this.#counts.postQueued--;
    this.#counts.post++;
    try {
      return await session.postrun();
    } finally {
      this.#counts.post--;
      release();
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

