/**
 * The CompletionRecord of one captured call, built after the upstream answered
 * and stored before the client sees the answer.
 */
import { randomBytes } from "node:crypto";
import type { CompletionRecord } from "../protocol/schemas.ts";
import type { ChatRequest, ChatResponse, Json } from "./chat-types.ts";
import type { ApiType } from "./dialect.ts";
import type { ProxySession } from "./types.ts";
import type { OutputClamp } from "./context-fit.ts";

let arrivals = 0;

/**
 * The process-wide arrival number of an upstream answer. One counter for the
 * whole process (not per proxy) so records from several proxies in one
 * process still order by arrival.
 */
export function nextSeq(): number {
  return arrivals++;
}

let pool = Buffer.alloc(0);
let at = 0;

/** `msg_` + 12 random hex digits (random bytes drawn from a pooled buffer: one syscall per 1024 ids). */
export function completionId(): string {
  if (at + 6 > pool.length) {
    pool = randomBytes(6 * 1024);
    at = 0;
  }
  at += 6;
  return "msg_" + pool.toString("hex", at - 6, at);
}

export interface RecordInput {
  session: ProxySession;
  apiType: ApiType;
  request: ChatRequest;
  original: Json;
  response: ChatResponse;
  seq: number;
  sideKind?: string;
  modelRequested: string;
  timings: Record<string, number>;
  policyVersion?: number;
  engineWeightVersion?: string | null;
  /** The output-token request was lowered to fit the engine's context. */
  clamp?: OutputClamp;
}

export function buildRecord(i: RecordInput): CompletionRecord {
  const metadata: Json = {
    ...i.session.metadata,
    session_id: i.session.sessionId,
    task_id: i.session.taskId,
    completion_role: i.sideKind ? "side" : "policy",
    model_requested: i.modelRequested,
    inference_timings: i.timings,
  };
  if (i.sideKind) metadata.side_kind = i.sideKind;
  if (i.clamp) metadata.output_tokens_clamp = { ...i.clamp } as unknown as Json;
  return {
    completion_id: completionId(),
    timestamp: new Date().toISOString(),
    request: i.request as unknown as Json,
    original_request: i.original,
    response: i.response as unknown as Json,
    metadata,
    seq: i.seq,
    attempt: i.session.attempt,
    api_type: i.apiType,
    ...(i.policyVersion === undefined ? {} : { policy_version: i.policyVersion }),
    ...(i.engineWeightVersion == null ? {} : { engine_weight_version: i.engineWeightVersion }),
  };
}
