/** The client over NATS: request/reply for the task API, JetStream for results and traces. */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { request } from "../nats/messages.ts";
import { PolarError } from "../protocol/errors.ts";
import type { InferenceReply, SubmitReply, TaskStatus } from "../protocol/schemas.ts";
import { SUBJECTS } from "../protocol/subjects.ts";
import { TaskStreams } from "./nats-streams.ts";
import { natsAuthFromEnv, natsConnectOptions, type NatsAuth } from "../security/nats-auth.ts";
import { statusPageSize } from "./status-pages.ts";
import type { StatusPage, Transport } from "./transport.ts";
import type { StreamOptions } from "./types.ts";

/** Room in a message for the reply envelope and the task's counters. */
const REPLY_HEADROOM = 16 * 1024;
/**
 * The most one session summary takes in a status reply: its error is capped at
 * 2,000 characters, its ids at 128; the rest is counters.
 */
const MAX_SUMMARY_BYTES = 2560;

export interface NatsTransportOptions {
  /** Request timeout for the task API (ms). */
  timeoutMs?: number;
  name?: string;
  /** Credentials and TLS (default: POLAR_NATS_* from the environment). */
  auth?: NatsAuth;
  /** Session summaries per status request (default 1,000, at most 10,000; lowered so that a page fits the server's max_payload). */
  statusPageSize?: number;
}

export class NatsTransport implements Transport {
  readonly nc: NatsConnection;
  readonly #streams: TaskStreams;
  readonly #timeoutMs: number;
  readonly #owned: boolean;
  readonly statusPageSize: number;

  constructor(nc: NatsConnection, opts: NatsTransportOptions = {}, owned = false) {
    this.nc = nc;
    this.#streams = new TaskStreams(nc);
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
    this.#owned = owned;
    // A reply larger than the server's max_payload is never delivered: the request would only time out.
    const fits = Math.floor(((nc.info?.max_payload ?? 1024 * 1024) - REPLY_HEADROOM) / MAX_SUMMARY_BYTES);
    this.statusPageSize = Math.max(1, Math.min(statusPageSize(opts.statusPageSize), fits));
  }

  static async connect(servers: string, opts: NatsTransportOptions = {}): Promise<NatsTransport> {
    statusPageSize(opts.statusPageSize);
    try {
      const nc = await connect({ servers, name: opts.name ?? "polar-client", maxReconnectAttempts: -1, reconnectTimeWait: 250, ...natsConnectOptions(opts.auth ?? natsAuthFromEnv()) });
      return new NatsTransport(nc, opts, true);
    } catch (err) {
      throw new PolarError("unavailable", `cannot connect to NATS at ${servers}: ${(err as Error).message}`, { cause: err });
    }
  }

  /** A task API call; failures of the connection itself (closed, disconnected) are typed `unavailable`. */
  async #call<T>(subject: string, body: unknown, timeoutMs = this.#timeoutMs): Promise<T> {
    try {
      return await request<T>(this.nc, subject, body, { timeoutMs });
    } catch (err) {
      if (err instanceof PolarError) throw err;
      throw new PolarError("unavailable", `cannot call ${subject}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
    }
  }

  submit(task: unknown): Promise<SubmitReply> {
    return this.#call<SubmitReply>(SUBJECTS.api.submit, task);
  }

  get(taskId: string, page?: StatusPage): Promise<TaskStatus> {
    return this.#call<TaskStatus>(SUBJECTS.api.get, { task_id: taskId, ...page });
  }

  cancel(taskId: string): Promise<TaskStatus> {
    return this.#call<TaskStatus>(SUBJECTS.api.cancel, { task_id: taskId });
  }

  pause(body: { timeout_seconds?: number }): Promise<InferenceReply> {
    // The reply comes once every gateway drained (bounded by its timeout, default 60 s).
    const ms = Math.max(this.#timeoutMs, ((body.timeout_seconds ?? 60) + 10) * 1000);
    return this.#call<InferenceReply>(SUBJECTS.api.inferencePause, body, ms);
  }

  resume(body: { policy_version: number }): Promise<InferenceReply> {
    return this.#call<InferenceReply>(SUBJECTS.api.inferenceResume, body, Math.max(this.#timeoutMs, 20_000));
  }

  results(taskId: string, sessionIds: readonly string[], opts: StreamOptions) {
    return this.#streams.results(taskId, sessionIds, opts);
  }

  traces(taskId: string, sessionIds: readonly string[], opts: StreamOptions) {
    return this.#streams.traces(taskId, sessionIds, opts);
  }

  /** Drains and closes the connection this client opened; one that dropped just before is closed as it is. */
  async close(): Promise<void> {
    if (!this.#owned || this.nc.isClosed()) return;
    try {
      await this.nc.drain();
    } catch {
      // The drain failed because the connection is down (nats.js: "connection disconnected"); nothing is
      // in flight (every request was answered or timed out), so closing without it loses nothing.
      await this.nc.close().catch(() => undefined); // already closed by the failed drain: nothing left to do
    }
  }
}
