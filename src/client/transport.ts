/** What the client needs from a connection to polar; NATS and HTTP implement it. */
import type { InferenceReply, SubmitReply, TaskStatus } from "../protocol/schemas.ts";
import type { ResultMessage, StreamOptions, TraceMessage } from "./types.ts";

/** One page of a task's session summaries, by sample index. */
export interface StatusPage {
  offset: number;
  limit: number;
}

export interface Transport {
  /** Session summaries per status request (NATS: also bounded so that a page fits in one message). */
  readonly statusPageSize: number;
  submit(task: unknown): Promise<SubmitReply>;
  /** One status page (the API's default page without `page`). */
  get(taskId: string, page?: StatusPage): Promise<TaskStatus>;
  cancel(taskId: string): Promise<TaskStatus>;
  /** Weight sync (`polar.api.inference.pause` / `.resume`). */
  pause(body: { timeout_seconds?: number }): Promise<InferenceReply>;
  resume(body: { policy_version: number }): Promise<InferenceReply>;
  /** The first result of each session of the run, as they land; ends when every session has one. */
  results(taskId: string, sessionIds: readonly string[], opts: StreamOptions): AsyncIterable<ResultMessage>;
  /** Every trace of the run from `opts.fromSeq`, each once; ends when all are passed. */
  traces(taskId: string, sessionIds: readonly string[], opts: StreamOptions): AsyncIterable<TraceMessage>;
  close(): Promise<void>;
}
