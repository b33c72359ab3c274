/**
 * The decisions of a session attempt (decide.ts, budget.ts, outcome.ts) as
 * tables: which status wins, which failure is recorded, what an evaluation
 * failure does, how budgets split a step, the timing of each phase, masking.
 * Timers are fake: budgets and timeouts are exercised without waiting.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { budgeted, clampDelay, MAX_TIMER_MS, remainingMs, stepBudget } from "../src/actors/gateway/budget.ts";
import {
  agentSummary,
  applyEvalFailure,
  completionSession,
  decideStatus,
  recordCancel,
  recordFailure,
  sessionResult,
  timingFromMarks,
  type EvalOutcome,
  type Failure,
} from "../src/actors/gateway/decide.ts";
import { maskIncomplete } from "../src/actors/gateway/outcome.ts";
import { PolarError } from "../src/protocol/errors.ts";
import { SessionDispatch, Trace, type AgentRunResult, type Trajectory } from "../src/protocol/schemas.ts";

const completed: AgentRunResult = { status: "completed", return_code: 0, error: null, metadata: {} };
const agentTimeout: AgentRunResult = { status: "timeout", return_code: -1, error: "step 0 timed out (agent budget)", metadata: { timeout_source: "agent", timeout_stage: "exec" } };
const sessionTimeout: AgentRunResult = { status: "timeout", return_code: -1, error: "step 0 timed out (session budget)", metadata: { timeout_source: "session", timeout_stage: "exec" } };
const exited: AgentRunResult = { status: "failed", return_code: 3, error: "step 0 exited with code 3", metadata: {} };
const initFailed: Failure = { message: "runtime initialization failed: boom", status: "ERROR" };
const initTimedOut: Failure = { message: "runtime initialization failed: prepare exceeded the session budget", status: "TIMEOUT" };

function trace(aligned = true): Trace {
  return Trace.parse({
    prompt_ids: [1, 2],
    response_ids: [3, 4],
    loss_mask: [1, 1],
    response_logprobs: aligned ? [-0.1, -0.2] : null,
    response_messages: [{ role: "assistant", content: "ok" }],
    finish_reason: "stop",
    reward: 1,
  });
}

function traj(status: Trajectory["status"] = "COMPLETED", traces = [trace(), trace()]): Trajectory {
  return { status, metadata: {}, traces, error: status === "COMPLETED" ? null : "built with errors" };
}

describe("which status wins", () => {
  const cases: Array<[string, Failure | null, AgentRunResult | null, Pick<Trajectory, "status" | "error">]> = [
    ["a clean run keeps what the builder said", null, completed, { status: "COMPLETED", error: null }],
    ["no agent result (INIT never ran RUN) keeps the builder's status", null, null, { status: "COMPLETED", error: null }],
    ["an INIT failure beats everything", initFailed, completed, { status: "ERROR", error: initFailed.message }],
    ["an INIT budget timeout is TIMEOUT", initTimedOut, null, { status: "TIMEOUT", error: initTimedOut.message }],
    ["a failure beats the agent's own timeout", initFailed, agentTimeout, { status: "ERROR", error: initFailed.message }],
    ["the agent's timeout is TIMEOUT", null, agentTimeout, { status: "TIMEOUT", error: agentTimeout.error! }],
    ["a non-zero exit is ERROR", null, exited, { status: "ERROR", error: exited.error! }],
    ["a timeout without a message still says why", null, { ...agentTimeout, error: null }, { status: "TIMEOUT", error: "agent timed out" }],
  ];
  it.each(cases)("%s", (_name, failure, agent, want) => {
    expect(decideStatus({ status: "COMPLETED", error: null }, failure, agent)).toEqual(want);
  });

  it("a builder ERROR stands when the run itself was clean", () => {
    expect(decideStatus({ status: "ERROR", error: "trajectory build failed: x" }, null, completed)).toEqual({ status: "ERROR", error: "trajectory build failed: x" });
  });
});

describe("which failure is recorded", () => {
  it("the first failure wins over later ones and over a cancellation", () => {
    const first = recordFailure(null, new PolarError("timeout", "runtime start exceeded the session budget"), "runtime initialization failed");
    expect(first).toEqual({ status: "TIMEOUT", message: "runtime initialization failed: runtime start exceeded the session budget" });
    expect(recordFailure(first, new Error("later"), "agent run failed")).toBe(first);
    expect(recordCancel(first, "session cancelled")).toBe(first);
  });

  it("a cancellation before any failure is an ERROR with its reason; errors after it keep the reason", () => {
    const c = recordCancel(null, "early stop: the task already has enough usable sessions");
    expect(c).toEqual({ status: "ERROR", message: "early stop: the task already has enough usable sessions" });
    expect(recordFailure(c, new PolarError("cancelled", "x"), "agent run failed")).toBe(c);
  });

  it("a non-timeout PolarError or a plain error is ERROR", () => {
    expect(recordFailure(null, new PolarError("runtime", "no such image"), "runtime initialization failed").status).toBe("ERROR");
    expect(recordFailure(null, "a string", "agent run failed")).toEqual({ status: "ERROR", message: "agent run failed: a string" });
  });
});

describe("what an evaluation that did not score does", () => {
  const cases: Array<[string, Trajectory["status"], EvalOutcome, Trajectory["status"], string | null, boolean]> = [
    ["scored: nothing changes", "COMPLETED", { kind: "scored" }, "COMPLETED", null, false],
    ["skipped: nothing changes", "TIMEOUT", { kind: "skipped" }, "TIMEOUT", "built with errors", false],
    ["a verifier timeout turns COMPLETED into TIMEOUT", "COMPLETED", { kind: "timeout", message: "evaluation exceeded the session budget" }, "TIMEOUT", "eval timed out: evaluation exceeded the session budget", true],
    ["a verifier timeout keeps an ERROR", "ERROR", { kind: "timeout", message: "t" }, "ERROR", "built with errors", true],
    ["an evaluator failure is ERROR whatever the status", "TIMEOUT", { kind: "failed", message: "exit 2" }, "ERROR", "evaluator failed: exit 2", false],
  ];
  it.each(cases)("%s", (_n, before, outcome, after, error, timedOut) => {
    const t = traj(before);
    expect(applyEvalFailure(t, outcome, "command")).toBe(timedOut);
    expect(t.status).toBe(after);
    expect(t.error).toBe(error);
    if (outcome.kind === "timeout") expect(t.metadata.evaluation).toEqual({ strategy: "command", verifier_timeout: true });
  });
});

describe("masking", () => {
  it("an agent-budget timeout keeps its aligned traces trainable and masks the others", () => {
    const t = traj("TIMEOUT", [trace(true), trace(false)]);
    expect(maskIncomplete(t, { agentResult: agentTimeout, evalTimedOut: false })).toBe(1);
    expect(t.traces.map((x) => x.loss_mask)).toEqual([[1, 1], [0, 0]]);
    expect(t.traces.map((x) => x.metadata.training_filter)).toMatchObject([
      { masked: false, trainable: true, reason: "agent_timeout" },
      { masked: true, trainable: false, reason: "agent_timeout_unaligned" },
    ]);
    expect(t.traces.map((x) => x.reward)).toEqual([0, 0]);
  });

  const masked: Array<[string, Trajectory["status"], AgentRunResult | null, boolean, string]> = [
    ["a session-budget timeout", "TIMEOUT", sessionTimeout, false, "session_timeout"],
    ["an agent timeout whose verifier also timed out", "TIMEOUT", agentTimeout, true, "session_timeout"],
    ["an error", "ERROR", exited, false, "session_error"],
  ];
  it.each(masked)("%s masks every trace", (_n, status, agent, evalTimedOut, reason) => {
    const t = traj(status);
    expect(maskIncomplete(t, { agentResult: agent, evalTimedOut })).toBe(0);
    expect(t.traces.every((x) => x.loss_mask.every((m) => m === 0))).toBe(true);
    expect(t.traces.every((x) => (x.metadata.training_filter as { reason: string }).reason === reason)).toBe(true);
    expect(t.metadata.evaluation).toMatchObject({ reward: 0, reward_discarded: true, reward_discard_reason: reason });
  });

  it("a COMPLETED trajectory is left alone", () => {
    const t = traj("COMPLETED");
    expect(maskIncomplete(t, { agentResult: completed, evalTimedOut: false })).toBe(2);
    expect(t.traces.map((x) => x.reward)).toEqual([1, 1]);
  });
});

describe("budgets", () => {
  it.each([
    [10_000, 4000, { timeoutMs: 4000, source: "agent" }],
    [3000, 4000, { timeoutMs: 3000, source: "session" }],
    [5000, 5000, { timeoutMs: 5000, source: "agent" }],
    [5000, Infinity, { timeoutMs: 5000, source: "session" }],
    [-20, 100, { timeoutMs: 1, source: "session" }],
  ])("session %d ms left, agent %d ms left -> %o", (session, agent, want) => {
    expect(stepBudget(session, agent)).toEqual(want);
  });

  it("the session budget counts from INIT start", () => {
    expect(remainingMs(20, 1000, 1000)).toBe(20_000);
    expect(remainingMs(20, 1000, 16_000)).toBe(5000);
    expect(remainingMs(20, 1000, 22_000)).toBe(-1000);
  });

  it("delays beyond what a timer holds are capped, never fire at once", () => {
    expect(clampDelay(3_000_000 * 1000)).toBe(MAX_TIMER_MS);
    expect(clampDelay(1e308 * 1000)).toBe(MAX_TIMER_MS);
    expect(clampDelay(-5)).toBe(0);
    expect(clampDelay(Number.NaN)).toBe(0);
    expect(clampDelay(1234)).toBe(1234);
  });
});

describe("budgeted phases (fake timers)", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const never = () => new Promise<never>(() => {});

  it("rejects with a timeout naming the phase when the budget runs out, not before", async () => {
    const ac = new AbortController();
    let settled: unknown;
    const p = budgeted(never(), 5000, "prepare", ac.signal).catch((e) => (settled = e));
    await vi.advanceTimersByTimeAsync(4999);
    expect(settled).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    await p;
    expect(settled).toBeInstanceOf(PolarError);
    expect(settled).toMatchObject({ code: "timeout", message: "prepare exceeded the session budget" });
  });

  it("resolves with the phase's value and leaves no timer behind", async () => {
    const ac = new AbortController();
    const p = budgeted(new Promise((r) => setTimeout(() => r("ready"), 100)), 5000, "runtime start", ac.signal);
    await vi.advanceTimersByTimeAsync(100);
    await expect(p).resolves.toBe("ready");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("rejects at once with the cancellation reason when the signal aborts", async () => {
    const ac = new AbortController();
    const p = budgeted(never(), 5000, "agent setup", ac.signal);
    ac.abort(new PolarError("cancelled", "session cancelled"));
    await expect(p).rejects.toMatchObject({ code: "cancelled", message: "session cancelled" });
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a budget of 3,000,000 s (beyond a timer's range) does not time out at once", async () => {
    const ac = new AbortController();
    let settled = false;
    void budgeted(never(), 3_000_000 * 1000, "prepare", ac.signal).catch(() => (settled = true));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(settled).toBe(false);
    ac.abort(new Error("done"));
  });
});

describe("timing and the result", () => {
  it("each phase is the span between its marks; unreached phases stay 0", () => {
    const t = timingFromMarks({ registered: 0, initStart: 10, runtimeStart: 15, runtimeStarted: 40, prepared: 60, initDone: 61, runStart: 100, setupStart: 101, setupDone: 110, execDone: 400, runDone: 401, postStart: 450, buildStart: 451, buildDone: 455, stopStart: 470, stopDone: 490, end: 491 });
    expect(t).toMatchObject({
      register_to_init_queue_ms: 10,
      container_start_ms: 25,
      runtime_validation_ms: 25,
      prepare_ms: 20,
      init_ms: 51,
      ready_queue_ms: 39,
      agent_setup_ms: 9,
      agent_exec_ms: 290,
      run_ms: 301,
      postrun_queue_ms: 49,
      build_ms: 4,
      eval_ms: 0,
      runtime_stop_ms: 20,
      postrun_ms: 41,
      e2e_ms: 491,
    });
  });

  it("an attempt that failed INIT waits for POSTRUN from the end of INIT", () => {
    const t = timingFromMarks({ registered: 0, initStart: 5, runtimeStart: 6, initDone: 30, postStart: 35, end: 50 });
    expect(t).toMatchObject({ init_ms: 25, container_start_ms: 0, run_ms: 0, postrun_queue_ms: 5, postrun_ms: 15, e2e_ms: 50 });
  });

  it("the result carries the failure over the trajectory's error, the attempt, the node and the lease token", () => {
    const dispatch = SessionDispatch.parse({
      session_id: "t.1", task_id: "t", sample_index: 1, instruction: "x", remaining_timeout_seconds: 60,
      agent: { harness: "shell", custom_shell: { command: "true" } }, metadata: { k: 1 },
    });
    const trajectory = traj("ERROR", []);
    const r = sessionResult({
      dispatch, attempt: 2, nodeId: "gw-1", trajectory, timing: timingFromMarks({ registered: 0 }),
      failure: initFailed, agent: null, session: completionSession(dispatch, 2, []), leaseToken: "tok",
    });
    expect(r).toMatchObject({ session_id: "t.1", task_id: "t", status: "ERROR", error: initFailed.message, attempt: 2, node_id: "gw-1", lease_token: "tok", agent_result: null, metadata: { k: 1 } });
    expect(r.completion_session).toMatchObject({ completion_count: 0, metadata: { k: 1, attempt: 2 } });
    expect(agentSummary(agentTimeout)).toEqual({ status: "timeout", return_code: -1, error: agentTimeout.error, timeout_source: "agent", timeout_stage: "exec" });
    expect(agentSummary(null)).toBeNull();
  });
});
