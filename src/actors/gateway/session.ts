/**
 * One session attempt inside a gateway: INIT (runtime start, prepare), RUN
 * (harness setup and steps, model calls through the proxy), POSTRUN (build,
 * evaluate, mask, tear down). Each phase is called by the stage pipeline;
 * none throws: failures become the session's result.
 *
 * This class sequences the phases and keeps the facts (marks, failure, agent
 * result); the effects of the agent run live in agent-run.ts, evaluation in
 * evaluation.ts, and every decision (status, masking, timing, the result) in
 * the pure functions of decide.ts and outcome.ts.
 *
 * Two budgets: the session budget (`remaining_timeout_seconds`) starts at
 * INIT; the agent budget (`metadata.agent_timeout`) starts at RUN. A timeout
 * during RUN still builds a partial trajectory from the captured calls.
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { errorMessage, PolarError } from "../../protocol/errors.ts";
import type { AgentRunResult, SessionDispatch, SessionResult, SessionStatus, SessionTiming, Trajectory } from "../../protocol/schemas.ts";
import type { Runtime } from "../../runtimes/types.ts";
import { attemptDir, initRuntime, runHarness, type RunScope } from "./agent-run.ts";
import { monotonic, remainingMs, type Clock } from "./budget.ts";
import type { CaptureRegistry } from "./capture.ts";
import type { GatewayContext } from "./context.ts";
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
  type Marks,
} from "./decide.ts";
import { FreshEvalRuntime, prepareEvaluation } from "./eval-runtime.ts";
import { routesToActors } from "./remote-eval.ts";
import { evaluateTrajectory, type Evaluate } from "./evaluation.ts";
import { maskIncomplete } from "./outcome.ts";

export interface AttemptOptions {
  clock?: Clock;
  /** The POSTRUN evaluation call (default: the in-process evaluator). */
  evaluate?: Evaluate;
  /** Remote-capable evaluations with `refresh_runtime` go to evaluator actors (no fresh runtime here then). */
  remoteEvaluation?: boolean;
}

export class SessionAttempt {
  readonly id: string;
  readonly abort = new AbortController();
  status: SessionStatus = "REGISTERED";
  /** Set when the gateway leaves: the session goes back to the queue instead of reporting. */
  requeue = false;
  /** The raw token of this attempt's lease, carried on its result. */
  leaseToken?: string;
  readonly #g: GatewayContext;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #opts: AttemptOptions;
  readonly #marks: Marks;
  #runtime?: Runtime;
  /** The fresh evaluation runtime (`refresh_runtime`), warmed up while the agent runs. */
  #fresh?: FreshEvalRuntime;
  #credential = "";
  #failure: Failure | null = null;
  #agent: AgentRunResult | null = null;
  /** Eval timings the evaluation reports (they are not marks of this attempt). */
  readonly #evalTiming: Partial<SessionTiming> = {};

  constructor(
    readonly dispatch: SessionDispatch,
    readonly attempt: number,
    g: GatewayContext,
    opts: AttemptOptions = {},
  ) {
    this.id = dispatch.session_id;
    this.#g = g;
    this.#opts = opts;
    this.#clock = opts.clock ?? monotonic;
    this.#marks = { registered: this.#clock() };
    this.#log = g.log.child({ session_id: this.id, task_id: dispatch.task_id, attempt });
  }

  get failed(): boolean {
    return this.#failure !== null;
  }

  /** True once the agent has finished running (whatever its outcome): what is left is POSTRUN. */
  get agentDone(): boolean {
    return this.#marks.runDone !== undefined;
  }

  get capture(): CaptureRegistry {
    return this.#g.capture;
  }

  cancel(reason = "session cancelled"): void {
    if (this.abort.signal.aborted) return;
    this.#failure = recordCancel(this.#failure, reason);
    this.abort.abort(new PolarError("cancelled", reason));
    void this.#runtime?.cancel().catch((err) => this.#log.warn({ err }, "runtime cancel failed"));
    this.#fresh?.cancel();
  }

  setStatus(s: SessionStatus): void {
    if (this.status === s) return;
    this.status = s;
    this.#g.emit("session.state_changed", { session_id: this.id, task_id: this.dispatch.task_id, status: s, attempt: this.attempt, node_id: this.#g.nodeId });
  }

  /** Milliseconds left of the session budget (counted from INIT start). */
  remainingMs(): number {
    return remainingMs(this.dispatch.remaining_timeout_seconds, this.#marks.initStart ?? this.#clock(), this.#clock());
  }

  #mark(name: keyof Marks): void {
    this.#marks[name] = this.#clock();
  }

  #scope(): RunScope {
    return {
      g: this.#g,
      dispatch: this.dispatch,
      attempt: this.attempt,
      log: this.#log,
      signal: this.abort.signal,
      clock: this.#clock,
      mark: (n) => this.#mark(n),
      sessionLeftMs: () => this.remainingMs(),
      cancelReason: () => this.#failure?.message,
    };
  }

  async init(): Promise<void> {
    this.#mark("initStart");
    this.setStatus("INITIALIZING");
    try {
      this.#credential = this.#g.capture.open({
        sessionId: this.id,
        taskId: this.dispatch.task_id,
        attempt: this.attempt,
        modelServed: this.dispatch.agent.model_name ?? undefined,
        metadata: { ...this.dispatch.metadata, sample_index: this.dispatch.sample_index },
      });
      await initRuntime(this.#scope(), (r) => (this.#runtime = r));
    } catch (err) {
      this.#fail(err, "runtime initialization failed");
    }
    this.#mark("initDone");
    if (!this.failed) this.setStatus("READY");
  }

  async run(): Promise<void> {
    this.#mark("runStart");
    if (this.failed || !this.#runtime) return;
    this.setStatus("RUNNING");
    const spec = this.dispatch.evaluator;
    if (spec?.refresh_runtime && !(this.#opts.remoteEvaluation && routesToActors(this.#g, spec))) (this.#fresh = new FreshEvalRuntime(this.#scope())).start();
    this.#g.capture.setActive(this.id, this.attempt, true);
    try {
      this.#agent = await runHarness(this.#scope(), this.#runtime, this.#credential);
    } catch (err) {
      this.#fail(err, "agent run failed");
    } finally {
      this.#g.capture.setActive(this.id, this.attempt, false);
      this.#mark("runDone");
    }
  }

  /** Builds, evaluates and tears down; returns the result to publish. */
  async postrun(): Promise<SessionResult> {
    this.#mark("postStart");
    this.setStatus("POST_RUN");
    const session = completionSession(this.dispatch, this.attempt, this.#g.capture.records(this.id, this.attempt));
    const trajectory = this.#build(session);
    const evalTimedOut = applyEvalFailure(trajectory, await this.#evaluate(trajectory), this.dispatch.evaluator?.strategy ?? "");
    maskIncomplete(trajectory, { agentResult: this.#agent, evalTimedOut });
    trajectory.metadata.agent_result = agentSummary(this.#agent);
    this.#mark("stopStart");
    await this.#teardown();
    this.#mark("stopDone");
    this.#mark("end");
    this.setStatus(trajectory.status);
    const result = sessionResult({
      dispatch: this.dispatch,
      attempt: this.attempt,
      nodeId: this.#g.nodeId,
      trajectory,
      timing: timingFromMarks(this.#marks, this.#runtime?.execStats()),
      failure: this.#failure,
      agent: this.#agent,
      session,
      leaseToken: this.leaseToken,
    });
    Object.assign(result.timing, this.#fresh?.timing(), this.#evalTiming);
    return result;
  }

  #build(session: ReturnType<typeof completionSession>): Trajectory {
    this.setStatus("BUILDING");
    this.#mark("buildStart");
    let trajectory: Trajectory;
    try {
      const builder = this.#g.registries.builders.resolve(this.dispatch.builder, this.#g.builderDeps());
      trajectory = builder.build(session);
    } catch (err) {
      trajectory = { status: "ERROR", metadata: {}, traces: [], error: `trajectory build failed: ${errorMessage(err)}` };
    }
    this.#mark("buildDone");
    const decided = decideStatus(trajectory, this.#failure, this.#agent);
    trajectory.status = decided.status;
    if (decided.error !== trajectory.error) trajectory.error = decided.error;
    return trajectory;
  }

  /** The POSTRUN evaluation seam (see evaluation.ts). */
  async #evaluate(trajectory: Trajectory): Promise<EvalOutcome> {
    const spec = this.dispatch.evaluator;
    if (!spec || this.abort.signal.aborted) return { kind: "skipped" };
    this.setStatus("EVALUATING");
    this.#mark("evalStart");
    try {
      const timeoutMs = () => Math.max(1000, this.remainingMs());
      const release = () => this.#runtime?.stop() ?? Promise.resolve();
      const hand = await prepareEvaluation({ g: this.#g, spec, agentRuntime: this.#runtime, fresh: this.#fresh, signal: this.abort.signal, timeoutMs, release });
      if ("kind" in hand) return hand;
      const artifactsDir = join(attemptDir(this.#g, this.id, this.attempt), "artifacts", "eval");
      return await evaluateTrajectory(
        this.#g,
        {
          spec,
          trajectory,
          dispatch: this.dispatch,
          agent: this.#agent,
          ...hand,
          runtime: hand.agentRuntime,
          artifactsDir,
          signal: this.abort.signal,
          timeoutMs: timeoutMs(),
          attempt: this.attempt,
          timing: this.#evalTiming,
          release,
        },
        this.#opts.evaluate,
      );
    } finally {
      this.#mark("evalDone");
    }
  }

  async #teardown(): Promise<void> {
    this.#g.capture.close(this.id, this.attempt);
    await this.#g.bindings.close(this.id, this.attempt);
    try {
      await this.#runtime?.stop();
    } catch (err) {
      this.#log.warn({ err }, "runtime stop failed");
    }
    await this.#fresh?.stop();
    if (!this.#g.keepSessionDirs) {
      await rm(attemptDir(this.#g, this.id, this.attempt), { recursive: true, force: true }).catch((err) =>
        this.#log.warn({ err }, "could not remove the session directory"),
      );
    }
  }

  #fail(err: unknown, what: string): void {
    const had = this.#failure;
    this.#failure = recordFailure(had, err, what);
    if (!had) this.#log.warn({ err: errorMessage(err) }, what);
  }
}
