/**
 * The decisions of a session attempt, as pure functions of what happened:
 * which failure is recorded, which status wins, the timing of each phase and
 * the SessionResult. SessionAttempt (session.ts) gathers the facts; nothing
 * here does I/O or reads a clock.
 */
import { errorMessage, PolarError } from "../../protocol/errors.ts";
import {
  emptyTiming,
  type AgentRunResult,
  type CompletionRecord,
  type CompletionSession,
  type SessionDispatch,
  type SessionResult,
  type SessionTiming,
  type Trajectory,
} from "../../protocol/schemas.ts";
import type { ExecStats } from "../../runtimes/types.ts";

/** Why an attempt failed before POSTRUN, and the status that failure gives it. */
export interface Failure {
  message: string;
  status: "ERROR" | "TIMEOUT";
}

/**
 * The failure to record for `err` during `what`. The first failure wins: a
 * cancellation already said why, and later errors are its consequences.
 */
export function recordFailure(current: Failure | null, err: unknown, what: string): Failure {
  if (current) return current;
  const timeout = err instanceof PolarError && err.code === "timeout";
  return { message: `${what}: ${errorMessage(err)}`, status: timeout ? "TIMEOUT" : "ERROR" };
}

/** A cancellation: recorded unless a failure already is. */
export function recordCancel(current: Failure | null, reason: string): Failure {
  return current ?? { message: reason, status: "ERROR" };
}

/**
 * The status of a built trajectory before evaluation. Precedence: a failure of
 * the attempt (INIT, RUN, cancellation) > the agent's own timeout > the
 * agent's non-zero exit > what the builder said.
 */
export function decideStatus(
  built: Pick<Trajectory, "status" | "error">,
  failure: Failure | null,
  agent: AgentRunResult | null,
): Pick<Trajectory, "status" | "error"> {
  if (failure) return { status: failure.status, error: failure.message };
  if (agent?.status === "timeout") return { status: "TIMEOUT", error: agent.error ?? "agent timed out" };
  if (agent?.status === "failed") return { status: "ERROR", error: agent.error ?? "agent failed" };
  return { status: built.status, error: built.error };
}

/** What became of the evaluation of a trajectory. */
export type EvalOutcome =
  | { kind: "skipped" }
  | { kind: "scored" }
  | { kind: "timeout"; message: string }
  | { kind: "failed"; message: string };

/**
 * Applies an evaluation that did not score: a timeout turns a COMPLETED
 * trajectory into TIMEOUT (a worse status stays), any other failure makes it
 * ERROR. Returns whether the verifier timed out (masking needs it).
 */
export function applyEvalFailure(traj: Trajectory, outcome: EvalOutcome, strategy: string): boolean {
  if (outcome.kind === "timeout") {
    traj.metadata.evaluation = { strategy, verifier_timeout: true };
    if (traj.status === "COMPLETED") {
      traj.status = "TIMEOUT";
      traj.error = `eval timed out: ${outcome.message}`;
    }
    return true;
  }
  if (outcome.kind === "failed") {
    traj.status = "ERROR";
    traj.error = `evaluator failed: ${outcome.message}`;
  }
  return false;
}

/** The agent result as the trajectory's metadata carries it. */
export function agentSummary(a: AgentRunResult | null): Record<string, unknown> | null {
  if (!a) return null;
  const extra = Object.fromEntries(["timeout_source", "timeout_stage"].filter((k) => k in a.metadata).map((k) => [k, a.metadata[k]]));
  return { status: a.status, return_code: a.return_code, error: a.error, ...extra };
}

/** Monotonic instants (ms) of an attempt's phase boundaries; absent = not reached. */
export interface Marks {
  registered: number;
  initStart?: number;
  runtimeStart?: number;
  runtimeStarted?: number;
  prepared?: number;
  initDone?: number;
  runStart?: number;
  setupStart?: number;
  setupDone?: number;
  execDone?: number;
  runDone?: number;
  postStart?: number;
  buildStart?: number;
  buildDone?: number;
  evalStart?: number;
  evalDone?: number;
  stopStart?: number;
  stopDone?: number;
  end?: number;
}

const span = (a: number | undefined, b: number | undefined): number | undefined => (a !== undefined && b !== undefined ? b - a : undefined);

/** The timing of an attempt from its marks and its runtime's exec counters. */
export function timingFromMarks(m: Marks, stats?: ExecStats): SessionTiming {
  const t = emptyTiming();
  const runtimeStart = span(m.runtimeStart, m.runtimeStarted);
  const set: Partial<Record<keyof SessionTiming, number | undefined>> = {
    register_to_init_queue_ms: span(m.registered, m.initStart),
    container_start_ms: runtimeStart,
    runtime_validation_ms: runtimeStart,
    prepare_ms: span(m.runtimeStarted, m.prepared),
    init_ms: span(m.initStart, m.initDone),
    ready_queue_ms: m.runStart !== undefined ? m.runStart - (m.initDone ?? m.runStart) : undefined,
    agent_setup_ms: span(m.setupStart, m.setupDone),
    agent_exec_ms: span(m.setupDone, m.execDone),
    run_ms: span(m.runStart, m.runDone),
    postrun_queue_ms: m.postStart !== undefined ? m.postStart - (m.runDone ?? m.initDone ?? m.postStart) : undefined,
    build_ms: span(m.buildStart, m.buildDone),
    eval_ms: span(m.evalStart, m.evalDone),
    runtime_stop_ms: span(m.stopStart, m.stopDone),
    postrun_ms: span(m.postStart, m.end),
    e2e_ms: span(m.registered, m.end),
  };
  for (const [k, v] of Object.entries(set)) if (v !== undefined) (t as Record<string, unknown>)[k] = v;
  if (stats) {
    Object.assign(t, {
      runtime_exec_ms: stats.ms,
      runtime_exec_count: stats.count,
      runtime_exec_timeout_count: stats.timeouts,
      runtime_exec_failure_count: stats.failures,
      runtime_exec_exception_count: stats.exceptions,
      runtime_exec_cancelled_count: stats.cancelled,
      runtime_exec_ms_by_category: stats.msByCategory,
      runtime_exec_count_by_category: stats.countByCategory,
    });
  }
  return t;
}

/** The captured session as the result carries it (the raw material of a rebuild). */
export function completionSession(d: SessionDispatch, attempt: number, records: CompletionRecord[]): CompletionSession {
  const first = (k: "model_requested" | "api_type") =>
    records.map((r) => (k === "api_type" ? r.api_type : (r.metadata?.model_requested as string | undefined))).find((v) => v && v !== "unknown") ?? null;
  return {
    session_id: d.session_id,
    created_at: d.created_at ?? null,
    completion_count: records.length,
    task_id: d.task_id,
    model_requested: first("model_requested"),
    model_used: (records.find((r) => typeof r.request?.model === "string")?.request.model as string | undefined) ?? null,
    api_type: first("api_type"),
    metadata: { ...d.metadata, attempt },
    completions: [...records],
  };
}

export interface ResultFacts {
  dispatch: SessionDispatch;
  attempt: number;
  nodeId: string;
  trajectory: Trajectory;
  timing: SessionTiming;
  failure: Failure | null;
  agent: AgentRunResult | null;
  session: CompletionSession;
  leaseToken?: string;
}

export function sessionResult(f: ResultFacts): SessionResult {
  return {
    session_id: f.dispatch.session_id,
    task_id: f.dispatch.task_id,
    status: f.trajectory.status,
    trajectory: f.trajectory,
    timing: f.timing,
    node_id: f.nodeId,
    error: f.failure?.message ?? f.trajectory.error,
    metadata: f.dispatch.metadata,
    attempt: f.attempt,
    agent_result: f.agent,
    completion_session: f.session,
    ...(f.leaseToken ? { lease_token: f.leaseToken } : {}),
  };
}
