/**
 * Fresh evaluation runtimes (`EvaluatorSpec.refresh_runtime`): a second
 * runtime of the session's spec, started and prepared (`eval_prepare`, or
 * `prepare` when that is null) in the background while the agent runs, so
 * POSTRUN does not pay its start. At POSTRUN the evaluator first takes what it
 * needs from the agent's runtime (`collect`, e.g. the patch); the agent's
 * runtime is then released at once and the evaluator runs in the fresh one.
 *
 * The fresh runtime follows its session: a cancel kills it, the session budget
 * bounds the wait for it, and it is stopped with the session (never outlives it).
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { errorMessage, PolarError } from "../../protocol/errors.ts";
import type { SessionTiming } from "../../protocol/schemas.ts";
import { runPrepare } from "../../runtimes/prepare.ts";
import type { Runtime } from "../../runtimes/types.ts";
import type { Evaluator } from "../../evaluators/types.ts";
import { attemptDir, runtimeSpec, type RunScope } from "./agent-run.ts";
import { budgeted } from "./budget.ts";
import type { GatewayContext } from "./context.ts";
import type { EvalOutcome } from "./decide.ts";
import type { EvaluatorSpec } from "./evaluation.ts";

export class FreshEvalRuntime {
  readonly #s: RunScope;
  #runtime?: Runtime;
  #ready?: Promise<Runtime>;
  #stopped = false;
  #startMs?: number;
  #prepareMs?: number;

  constructor(s: RunScope) {
    this.#s = s;
  }

  /** Begins starting and preparing the runtime; failures surface from `ready()`. */
  start(): void {
    this.#ready ??= this.#boot();
    this.#ready.catch(() => {}); // observed by ready(); a session that never evaluates must not leave an unhandled rejection
  }

  async #boot(): Promise<Runtime> {
    const s = this.#s;
    const spec = runtimeSpec(s);
    const dir = join(attemptDir(s.g, s.dispatch.session_id, s.attempt), "eval");
    await mkdir(join(dir, "logs"), { recursive: true });
    const rt = s.g.registries.runtimes.resolve(
      { strategy: spec.backend, config: {} },
      { spec, ctx: { sessionId: s.dispatch.session_id, role: "eval", gatewayId: s.g.nodeId, proxy: s.g.proxyEndpoint, sessionDir: dir, toolsDir: s.g.toolsDir, log: s.log.child({ runtime: "eval" }) } },
    );
    this.#runtime = rt;
    if (this.#stopped) throw new PolarError("cancelled", "session ended before its evaluation runtime started");
    const t0 = s.clock();
    await budgeted(rt.start(), s.sessionLeftMs(), "evaluation runtime start", s.signal);
    this.#startMs = s.clock() - t0;
    const t1 = s.clock();
    const field = spec.eval_prepare ? "runtime.eval_prepare" : "runtime.prepare";
    await budgeted(runPrepare(rt, spec.eval_prepare ?? spec.prepare, { signal: s.signal, log: s.log, uploadRoots: s.g.uploadRoots }), s.sessionLeftMs(), field, s.signal).catch((err) => {
      throw err instanceof PolarError && (err.code === "timeout" || err.code === "cancelled") ? err : new PolarError("runtime", `${field} failed in the evaluation runtime: ${errorMessage(err)}`, { cause: err });
    });
    this.#prepareMs = s.clock() - t1;
    return rt;
  }

  /** The started and prepared runtime; rejects (naming the stage) when it could not be made within the budget. */
  async ready(timeoutMs: number): Promise<Runtime> {
    this.start();
    try {
      return await budgeted(this.#ready!, timeoutMs, "waiting for the evaluation runtime", this.#s.signal);
    } catch (err) {
      if (err instanceof PolarError && (err.code === "timeout" || err.code === "cancelled")) throw err;
      throw new PolarError("runtime", `evaluation runtime failed: ${errorMessage(err)}`, { cause: err });
    }
  }

  /** Kills what runs in it (cancellation); `stop()` still follows from the session's teardown. */
  cancel(): void {
    this.#stopped = true;
    void this.#runtime?.cancel().catch((err) => this.#s.log.warn({ err }, "evaluation runtime cancel failed"));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    // A start still in flight is awaited so that what it creates is removed too.
    await this.#ready?.catch(() => undefined);
    await this.#runtime?.stop().catch((err) => this.#s.log.warn({ err }, "evaluation runtime stop failed"));
  }

  timing(): Partial<SessionTiming> {
    const t: Partial<SessionTiming> = {};
    if (this.#startMs !== undefined) t.eval_container_start_ms = t.eval_runtime_validation_ms = this.#startMs;
    if (this.#prepareMs !== undefined) t.eval_prepare_ms = this.#prepareMs;
    return t;
  }
}

export interface HandOver {
  /** What the evaluator took from the agent's runtime. */
  collected?: unknown;
  /** The agent's runtime, unless it was released. */
  agentRuntime?: Runtime;
  evalRuntime?: Runtime;
}

/**
 * Before evaluation: the evaluator's `collect` in the agent's runtime, then
 * (with a fresh runtime) the agent's runtime released and the fresh one awaited.
 * Without `collect`, the agent's runtime stays up next to the fresh one.
 */
export async function handOver(opts: {
  evaluator: Evaluator;
  agentRuntime?: Runtime;
  fresh?: FreshEvalRuntime;
  env: Record<string, string>;
  signal: AbortSignal;
  timeoutMs: () => number;
  release: () => Promise<void>;
}): Promise<HandOver> {
  const { evaluator, agentRuntime, fresh } = opts;
  if (!fresh) return { agentRuntime };
  let collected: unknown;
  let kept = agentRuntime;
  if (evaluator.collect && agentRuntime) {
    collected = await budgeted(evaluator.collect({ runtime: agentRuntime, env: opts.env, signal: opts.signal, timeoutMs: opts.timeoutMs() }), opts.timeoutMs(), "collecting from the agent's runtime", opts.signal);
    await opts.release();
    kept = undefined;
  }
  const evalRuntime = await fresh.ready(opts.timeoutMs());
  return { collected, agentRuntime: kept, evalRuntime };
}

/**
 * The hand-over for one session's evaluation, failures turned into the
 * evaluation's outcome (a fresh runtime that cannot start fails the
 * evaluation, naming why; an exhausted budget is an evaluation timeout).
 */
export async function prepareEvaluation(opts: {
  g: GatewayContext;
  spec: EvaluatorSpec;
  agentRuntime?: Runtime;
  fresh?: FreshEvalRuntime;
  signal: AbortSignal;
  timeoutMs: () => number;
  release: () => Promise<void>;
}): Promise<HandOver | EvalOutcome> {
  if (!opts.fresh) return { agentRuntime: opts.agentRuntime };
  try {
    const evaluator = opts.g.registries.evaluators.resolve(opts.spec, {});
    return await handOver({ ...opts, evaluator, env: opts.spec.env });
  } catch (err) {
    const timedOut = err instanceof PolarError && err.code === "timeout";
    return { kind: timedOut ? "timeout" : "failed", message: errorMessage(err) };
  }
}
