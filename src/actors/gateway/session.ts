/**
 * One session attempt inside a gateway: INIT (runtime start, prepare), RUN
 * (harness setup and steps, model calls through the proxy), POSTRUN (build,
 * evaluate, mask, tear down). Each phase is called by the stage pipeline;
 * none throws: failures become the session's result.
 *
 * Two budgets: the session budget (`remaining_timeout_seconds`) starts at
 * INIT; the agent budget (`metadata.agent_timeout`) starts at RUN. A timeout
 * during RUN still builds a partial trajectory from the captured calls.
 */
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { errorMessage, PolarError } from "../../protocol/errors.ts";
import {
  emptyTiming,
  RuntimeSpec,
  type AgentRunResult,
  type CompletionSession,
  type SessionDispatch,
  type SessionResult,
  type SessionStatus,
  type SessionTiming,
  type Trajectory,
} from "../../protocol/schemas.ts";
import type { Runtime } from "../../runtimes/types.ts";
import type { Harness, HarnessContext } from "../../harnesses/types.ts";
import { proxyEnv } from "../../harnesses/env.ts";
import { runPrepare } from "../../runtimes/prepare.ts";
import type { CaptureRegistry } from "./capture.ts";
import { maskIncomplete, mergeEvaluation } from "./outcome.ts";
import type { GatewayContext } from "./context.ts";

const LOG_TAIL = 4000;

export class SessionAttempt {
  readonly id: string;
  readonly abort = new AbortController();
  readonly timing: SessionTiming = emptyTiming();
  status: SessionStatus = "REGISTERED";
  /** Set when the gateway leaves: the session goes back to the queue instead of reporting. */
  requeue = false;
  readonly #g: GatewayContext;
  readonly #log: Logger;
  readonly #t0 = performance.now();
  #initStart = 0;
  #runtime?: Runtime;
  #credential = "";
  #error: string | null = null;
  /** The status a failure (#error) gives the trajectory: TIMEOUT for an exhausted budget. */
  #errorStatus: "ERROR" | "TIMEOUT" = "ERROR";
  #agent: AgentRunResult | null = null;
  #marks: Record<string, number> = {};

  constructor(
    readonly dispatch: SessionDispatch,
    readonly attempt: number,
    g: GatewayContext,
  ) {
    this.id = dispatch.session_id;
    this.#g = g;
    this.#log = g.log.child({ session_id: this.id, task_id: dispatch.task_id, attempt });
  }

  get failed(): boolean {
    return this.#error !== null;
  }

  get capture(): CaptureRegistry {
    return this.#g.capture;
  }

  cancel(reason = "session cancelled"): void {
    if (this.abort.signal.aborted) return;
    this.#error ??= reason;
    this.abort.abort(new PolarError("cancelled", reason));
    void this.#runtime?.cancel().catch((err) => this.#log.warn({ err }, "runtime cancel failed"));
  }

  mark(name: string): void {
    this.#marks[name] = performance.now();
  }

  setStatus(s: SessionStatus): void {
    if (this.status === s) return;
    this.status = s;
    this.#g.emit("session.state_changed", { session_id: this.id, task_id: this.dispatch.task_id, status: s, attempt: this.attempt, node_id: this.#g.nodeId });
  }

  /** Milliseconds left of the session budget (counted from INIT start). */
  remainingMs(): number {
    return this.dispatch.remaining_timeout_seconds * 1000 - (performance.now() - this.#initStart);
  }

  async init(): Promise<void> {
    this.#initStart = performance.now();
    this.timing.register_to_init_queue_ms = this.#initStart - this.#t0;
    this.setStatus("INITIALIZING");
    try {
      const spec = RuntimeSpec.parse(this.dispatch.runtime ?? this.#g.defaultRuntime);
      this.#credential = this.#g.capture.open({
        sessionId: this.id,
        taskId: this.dispatch.task_id,
        attempt: this.attempt,
        modelServed: this.dispatch.agent.model_name ?? undefined,
        metadata: { ...this.dispatch.metadata, sample_index: this.dispatch.sample_index },
      });
      const sessionDir = join(this.#g.workRoot, `${this.id}.a${this.attempt}`);
      await mkdir(join(sessionDir, "logs", "agent"), { recursive: true });
      const runtime = this.#g.registries.runtimes.resolve(
        { strategy: spec.backend, config: {} },
        { spec, ctx: { sessionId: this.id, gatewayId: this.#g.nodeId, proxy: this.#g.proxyEndpoint, sessionDir, toolsDir: this.#g.toolsDir, log: this.#log } },
      );
      this.#runtime = runtime;
      const t = performance.now();
      await this.#budgeted(runtime.start(), this.remainingMs(), "runtime start");
      this.timing.container_start_ms = this.timing.runtime_validation_ms = performance.now() - t;
      const p = performance.now();
      await this.#budgeted(runPrepare(runtime, spec.prepare, { signal: this.abort.signal, log: this.#log }), this.remainingMs(), "prepare");
      this.timing.prepare_ms = performance.now() - p;
    } catch (err) {
      this.#fail(err, "runtime initialization failed");
    }
    this.timing.init_ms = performance.now() - this.#initStart;
    this.mark("init_done");
    if (!this.failed) this.setStatus("READY");
  }

  async run(): Promise<void> {
    const runStart = performance.now();
    this.timing.ready_queue_ms = runStart - (this.#marks.init_done ?? runStart);
    if (this.failed || !this.#runtime) return;
    this.setStatus("RUNNING");
    const runtime = this.#runtime;
    const agentTimeout = this.dispatch.metadata.agent_timeout as number | undefined;
    const agentDeadline = agentTimeout ? runStart + agentTimeout * 1000 : Infinity;
    this.#g.capture.setActive(this.id, true);
    try {
      const harness = this.#g.registries.harnesses.resolve(
        { strategy: this.dispatch.agent.harness ?? "", config: this.dispatch.agent.settings },
        { agent: this.dispatch.agent },
      );
      const ctx = this.#harnessContext(runtime);
      const s = performance.now();
      await this.#budgeted(harness.setup(ctx), Math.min(this.remainingMs(), agentDeadline - s), "agent setup");
      this.timing.agent_setup_ms = performance.now() - s;
      const e = performance.now();
      this.#agent = await this.#runSteps(harness, ctx, agentDeadline);
      this.timing.agent_exec_ms = performance.now() - e;
    } catch (err) {
      this.#fail(err, "agent run failed");
    } finally {
      this.#g.capture.setActive(this.id, false);
      this.timing.run_ms = performance.now() - runStart;
      this.mark("run_done");
    }
  }

  #harnessContext(runtime: Runtime): HarnessContext {
    const env = {
      ...proxyEnv({ proxyUrl: runtime.proxyUrl, credential: this.#credential, sessionId: this.id, taskId: this.dispatch.task_id }),
      POLAR_SAMPLE_INDEX: String(this.dispatch.sample_index),
      ...(RuntimeSpec.parse(this.dispatch.runtime ?? this.#g.defaultRuntime).env ?? {}),
      ...this.dispatch.agent.env,
    };
    return { runtime, proxyUrl: runtime.proxyUrl, credential: this.#credential, sessionId: this.id, taskId: this.dispatch.task_id, env };
  }

  async #runSteps(harness: Harness, ctx: HarnessContext, agentDeadline: number): Promise<AgentRunResult> {
    const steps = harness.steps(this.dispatch.instruction, ctx);
    const started = performance.now();
    for (const [i, step] of steps.entries()) {
      const sessionLeft = this.remainingMs();
      const agentLeft = agentDeadline - performance.now();
      const timeoutMs = Math.max(1, Math.min(sessionLeft, agentLeft));
      const r = await ctx.runtime.exec(step.command, {
        cwd: step.cwd,
        env: { ...ctx.env, ...step.env },
        timeoutMs,
        signal: this.abort.signal,
        category: "agent",
      });
      await this.#writeStepLogs(i, r.stdout, r.stderr);
      const meta = { step: i, stdout_tail: r.stdout.slice(-LOG_TAIL), stderr_tail: r.stderr.slice(-LOG_TAIL), duration_ms: performance.now() - started };
      if (r.cancelled || this.abort.signal.aborted) throw new PolarError("cancelled", this.#error ?? "session cancelled");
      if (r.timedOut) {
        const source = agentLeft <= sessionLeft ? "agent" : "session";
        return { status: "timeout", return_code: -1, error: `step ${i} timed out (${source} budget)`, metadata: { ...meta, timeout_source: source, timeout_stage: "exec" } };
      }
      if (r.exitCode !== 0) {
        return { status: "failed", return_code: r.exitCode, error: `step ${i} exited with code ${r.exitCode}`, metadata: meta };
      }
      if (i === steps.length - 1) return { status: "completed", return_code: 0, error: null, metadata: meta };
    }
    return { status: "completed", return_code: 0, error: null, metadata: { duration_ms: 0 } };
  }

  async #writeStepLogs(i: number, stdout: string, stderr: string): Promise<void> {
    const dir = join(this.#g.workRoot, `${this.id}.a${this.attempt}`, "logs", "agent");
    const n = String(i).padStart(2, "0");
    await writeFile(join(dir, `step.${n}.stdout.log`), stdout).catch(() => {});
    await writeFile(join(dir, `step.${n}.stderr.log`), stderr).catch(() => {});
  }

  /** Builds, evaluates and tears down; returns the result to publish. */
  async postrun(): Promise<SessionResult> {
    const start = performance.now();
    this.timing.postrun_queue_ms = start - (this.#marks.run_done ?? this.#marks.init_done ?? start);
    this.setStatus("POST_RUN");
    const records = this.#g.capture.records(this.id);
    const session: CompletionSession = this.#completionSession(records);
    let trajectory = this.#build(session);
    const evalTimedOut = await this.#evaluate(trajectory);
    maskIncomplete(trajectory, { agentResult: this.#agent, evalTimedOut });
    trajectory.metadata.agent_result = this.#agent
      ? { status: this.#agent.status, return_code: this.#agent.return_code, error: this.#agent.error, ...pick(this.#agent.metadata, ["timeout_source", "timeout_stage"]) }
      : null;
    const s = performance.now();
    await this.#teardown();
    this.timing.runtime_stop_ms = performance.now() - s;
    this.timing.postrun_ms = performance.now() - start;
    this.timing.e2e_ms = performance.now() - this.#t0;
    const stats = this.#runtime?.execStats();
    if (stats) {
      Object.assign(this.timing, {
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
    this.setStatus(trajectory.status);
    return {
      session_id: this.id,
      task_id: this.dispatch.task_id,
      status: trajectory.status,
      trajectory,
      timing: this.timing,
      node_id: this.#g.nodeId,
      error: this.#error ?? trajectory.error,
      metadata: this.dispatch.metadata,
      attempt: this.attempt,
      agent_result: this.#agent,
      completion_session: session,
    };
  }

  #completionSession(records: CompletionSession["completions"]): CompletionSession {
    const first = (k: "model_requested" | "api_type") =>
      records.map((r) => (k === "api_type" ? r.api_type : (r.metadata?.model_requested as string | undefined))).find((v) => v && v !== "unknown") ?? null;
    return {
      session_id: this.id,
      created_at: this.dispatch.created_at ?? null,
      completion_count: records.length,
      task_id: this.dispatch.task_id,
      model_requested: first("model_requested"),
      model_used: (records.find((r) => typeof r.request?.model === "string")?.request.model as string | undefined) ?? null,
      api_type: first("api_type"),
      metadata: { ...this.dispatch.metadata, attempt: this.attempt },
      completions: [...records],
    };
  }

  #build(session: CompletionSession): Trajectory {
    this.setStatus("BUILDING");
    const b = performance.now();
    let trajectory: Trajectory;
    try {
      const builder = this.#g.registries.builders.resolve(this.dispatch.builder, this.#g.builderDeps());
      trajectory = builder.build(session);
    } catch (err) {
      trajectory = { status: "ERROR", metadata: {}, traces: [], error: `trajectory build failed: ${errorMessage(err)}` };
    }
    this.timing.build_ms = performance.now() - b;
    const a = this.#agent;
    if (this.#error) {
      trajectory.status = this.#errorStatus;
      trajectory.error = this.#error;
    } else if (a?.status === "timeout") {
      trajectory.status = "TIMEOUT";
      trajectory.error = a.error ?? "agent timed out";
    } else if (a?.status === "failed") {
      trajectory.status = "ERROR";
      trajectory.error = a.error ?? "agent failed";
    }
    return trajectory;
  }

  /** Runs the evaluator; returns true when it timed out. */
  async #evaluate(trajectory: Trajectory): Promise<boolean> {
    const spec = this.dispatch.evaluator;
    if (!spec || this.abort.signal.aborted) return false;
    this.setStatus("EVALUATING");
    const e = performance.now();
    try {
      const evaluator = this.#g.registries.evaluators.resolve(spec, {});
      const timeoutMs = Math.max(1000, this.remainingMs());
      const result = await this.#budgeted(
        evaluator.evaluate({
          trajectory,
          sessionId: this.id,
          taskId: this.dispatch.task_id,
          agentResult: this.#agent,
          runtime: this.#runtime,
          env: spec.env,
          signal: this.abort.signal,
          timeoutMs,
        }),
        timeoutMs,
        "evaluation",
      );
      mergeEvaluation(trajectory, result, spec.strategy);
      return false;
    } catch (err) {
      const timedOut = err instanceof PolarError && err.code === "timeout";
      if (timedOut) {
        trajectory.metadata.evaluation = { strategy: spec.strategy, verifier_timeout: true };
        if (trajectory.status === "COMPLETED") {
          trajectory.status = "TIMEOUT";
          trajectory.error = `eval timed out: ${errorMessage(err)}`;
        }
      } else {
        trajectory.status = "ERROR";
        trajectory.error = `evaluator failed: ${errorMessage(err)}`;
      }
      return timedOut;
    } finally {
      this.timing.eval_ms = performance.now() - e;
    }
  }

  async #teardown(): Promise<void> {
    this.#g.capture.close(this.id);
    try {
      await this.#runtime?.stop();
    } catch (err) {
      this.#log.warn({ err }, "runtime stop failed");
    }
    if (!this.#g.keepSessionDirs) {
      await rm(join(this.#g.workRoot, `${this.id}.a${this.attempt}`), { recursive: true, force: true }).catch(() => {});
    }
  }

  #fail(err: unknown, what: string): void {
    if (this.#error) return; // cancellation already said why
    const timeout = err instanceof PolarError && err.code === "timeout";
    this.#errorStatus = timeout ? "TIMEOUT" : "ERROR";
    this.#error = `${what}: ${errorMessage(err)}`;
    this.#log.warn({ err: errorMessage(err) }, what);
  }

  /** Races a phase against the remaining budget and cancellation. */
  async #budgeted<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
    const timeout = new PolarError("timeout", `${what} exceeded the session budget`);
    let timer: NodeJS.Timeout | undefined;
    const signal = this.abort.signal;
    let onAbort = () => {};
    try {
      return await Promise.race([
        p,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(timeout), Math.max(0, ms));
          onAbort = () => reject(signal.reason);
          if (signal.aborted) onAbort();
          else signal.addEventListener("abort", onAbort, { once: true });
        }),
      ]);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    }
  }
}

function pick(o: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((k) => k in o).map((k) => [k, o[k]]));
}
