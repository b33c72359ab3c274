/**
 * What the trainer client hands out: trace messages as they sit on
 * POLAR_TRACES (plus their stream sequence), and the GRPO group of a task.
 */
import type { SessionResult, SessionStatus, TaskState, Trace } from "../protocol/schemas.ts";

/** One trace of one session, as published on `polar.trace.<task>.<session>`, with its stream sequence. */
export interface TraceMessage {
  task_id: string;
  session_id: string;
  trace_index: number;
  trace_count: number;
  status: SessionStatus;
  attempt: number;
  trace: Trace;
  /** POLAR_TRACES stream sequence: pass `fromSeq: seq + 1` to resume after it. */
  seq: number;
}

/** A SessionResult with its POLAR_RESULTS stream sequence. */
export type ResultMessage = SessionResult & { seq: number };

export interface GroupSession {
  session_id: string;
  sample_index: number;
  status: SessionStatus;
  attempt: number;
  /** Mean of the session's trace rewards; 0 when it has none (a failed session). */
  reward: number;
  /** Group-normalised advantage: (reward - mean) / (std + eps) over every session of the task. */
  advantage: number;
  traces: TraceMessage[];
}

export interface Group {
  task_id: string;
  status: TaskState;
  sessions: GroupSession[];
  /** Traces masked out because their policy was too old (`training_filter.reason = "stale_policy"`). */
  stale_traces: number;
}

export interface StreamOptions {
  /** Start at this stream sequence (resume after the last one you processed). */
  fromSeq?: number;
  signal?: AbortSignal;
}
