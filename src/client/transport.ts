/** What the client needs from a connection to polar; NATS and HTTP implement it. */
import type { InferenceReply, SubmitReply, TaskStatus } from "../protocol/schemas.ts";
import type { ResultMessage, StreamOptions, TraceMessage } from "./types.ts";

export interface Transport {
  submit(task: unknown): Promise<SubmitReply>;
  get(taskId: string): Promise<TaskStatus>;
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
