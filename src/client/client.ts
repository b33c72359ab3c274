/**
 * The trainer's client: `PolarClient.connect({ nats })` or `({ api })`, then
 * `submit(task)` for a TaskHandle (results, traces, group, cancel).
 */
import type { NatsAuth } from "../security/nats-auth.ts";
import type { NatsConnection } from "@nats-io/transport-node";
import { HttpTransport } from "./http-transport.ts";
import { TaskHandle } from "./handle.ts";
import { NatsTransport } from "./nats-transport.ts";
import { readAllSessions } from "./status-pages.ts";
import type { Transport } from "./transport.ts";
import type { InferenceReply, TaskRequestInput } from "../protocol/schemas.ts";

/**
 * `timeoutMs`: each task API request (default 30 s). `statusPageSize`: session
 * summaries per status request when the client reads a task's sessions
 * (default 1,000, at most 10,000; over NATS also no more than fit in one message).
 */
export type ConnectOptions =
  | { nats: string; api?: never; name?: string; timeoutMs?: number; auth?: NatsAuth; statusPageSize?: number }
  | { api: string; nats?: never; token?: string; timeoutMs?: number; statusPageSize?: number }
  | { connection: NatsConnection; timeoutMs?: number; statusPageSize?: number };

export class PolarClient {
  readonly #t: Transport;

  private constructor(t: Transport) {
    this.#t = t;
  }

  /** Over NATS (`{ nats: "nats://host:4222" }`, or an open `connection`) or the HTTP API only (`{ api: "http://host:port" }`). */
  static async connect(opts: ConnectOptions): Promise<PolarClient> {
    if ("connection" in opts && opts.connection) return new PolarClient(new NatsTransport(opts.connection, opts));
    if ("nats" in opts && opts.nats) return new PolarClient(await NatsTransport.connect(opts.nats, opts));
    if ("api" in opts && opts.api) return new PolarClient(new HttpTransport(opts.api, opts));
    throw new TypeError("PolarClient.connect needs { nats } or { api }");
  }

  /** Submits a task (TaskRequest JSON); bad fields reject with a `validation` PolarError listing each. */
  async submit(task: TaskRequestInput | Record<string, unknown>): Promise<TaskHandle> {
    const reply = await this.#t.submit(task);
    return new TaskHandle(this.#t, reply.task_id, reply.total_sessions);
  }

  /** A handle on an existing task (also one that finished long ago); unknown ids reject with `not_found`. */
  async task(taskId: string): Promise<TaskHandle> {
    const st = await readAllSessions(this.#t, taskId, { pageSize: this.#t.statusPageSize });
    return new TaskHandle(this.#t, st.task_id, st.total_sessions, st.sessions);
  }

  /**
   * Weight sync: every gateway holds new model calls (agents just see a slow
   * answer) and drains the ones in flight, bounded by `timeoutSeconds`. The
   * reply says per node what was drained and held; pausing a paused cluster
   * is idempotent (`unchanged: true`).
   */
  pause(timeoutSeconds?: number): Promise<InferenceReply> {
    return this.#t.pause(timeoutSeconds === undefined ? {} : { timeout_seconds: timeoutSeconds });
  }

  /** Releases the held calls under `policyVersion`, which never goes down (a lower one rejects with `conflict`). */
  resume(policyVersion: number): Promise<InferenceReply> {
    return this.#t.resume({ policy_version: policyVersion });
  }

  async close(): Promise<void> {
    await this.#t.close();
  }
}
