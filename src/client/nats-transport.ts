/** The client over NATS: request/reply for the task API, JetStream for results and traces. */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { request } from "../nats/messages.ts";
import { PolarError } from "../protocol/errors.ts";
import type { InferenceReply, SubmitReply, TaskStatus } from "../protocol/schemas.ts";
import { SUBJECTS } from "../protocol/subjects.ts";
import { TaskStreams } from "./nats-streams.ts";
import { natsAuthFromEnv, natsConnectOptions, type NatsAuth } from "../security/nats-auth.ts";
import type { Transport } from "./transport.ts";
import type { StreamOptions } from "./types.ts";

export interface NatsTransportOptions {
  /** Request timeout for the task API (ms). */
  timeoutMs?: number;
  name?: string;
  /** Credentials and TLS (default: POLAR_NATS_* from the environment). */
  auth?: NatsAuth;
}

export class NatsTransport implements Transport {
  readonly nc: NatsConnection;
  readonly #streams: TaskStreams;
  readonly #timeoutMs: number;
  readonly #owned: boolean;

  constructor(nc: NatsConnection, opts: NatsTransportOptions = {}, owned = false) {
    this.nc = nc;
    this.#streams = new TaskStreams(nc);
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
    this.#owned = owned;
  }

  static async connect(servers: string, opts: NatsTransportOptions = {}): Promise<NatsTransport> {
    try {
      const nc = await connect({ servers, name: opts.name ?? "polar-client", maxReconnectAttempts: -1, reconnectTimeWait: 250, ...natsConnectOptions(opts.auth ?? natsAuthFromEnv()) });
      return new NatsTransport(nc, opts, true);
    } catch (err) {
      throw new PolarError("unavailable", `cannot connect to NATS at ${servers}: ${(err as Error).message}`, { cause: err });
    }
  }

  submit(task: unknown): Promise<SubmitReply> {
    return request<SubmitReply>(this.nc, SUBJECTS.api.submit, task, { timeoutMs: this.#timeoutMs });
  }

  get(taskId: string): Promise<TaskStatus> {
    return request<TaskStatus>(this.nc, SUBJECTS.api.get, { task_id: taskId }, { timeoutMs: this.#timeoutMs });
  }

  cancel(taskId: string): Promise<TaskStatus> {
    return request<TaskStatus>(this.nc, SUBJECTS.api.cancel, { task_id: taskId }, { timeoutMs: this.#timeoutMs });
  }

  pause(body: { timeout_seconds?: number }): Promise<InferenceReply> {
    // The reply comes once every gateway drained (bounded by its timeout, default 60 s).
    const ms = Math.max(this.#timeoutMs, ((body.timeout_seconds ?? 60) + 10) * 1000);
    return request<InferenceReply>(this.nc, SUBJECTS.api.inferencePause, body, { timeoutMs: ms });
  }

  resume(body: { policy_version: number }): Promise<InferenceReply> {
    return request<InferenceReply>(this.nc, SUBJECTS.api.inferenceResume, body, { timeoutMs: Math.max(this.#timeoutMs, 20_000) });
  }

  results(taskId: string, sessionIds: readonly string[], opts: StreamOptions) {
    return this.#streams.results(taskId, sessionIds, opts);
  }

  traces(taskId: string, sessionIds: readonly string[], opts: StreamOptions) {
    return this.#streams.traces(taskId, sessionIds, opts);
  }

  async close(): Promise<void> {
    if (this.#owned && !this.nc.isClosed()) await this.nc.drain();
  }
}
