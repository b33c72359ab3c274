/**
 * POSTRUN evaluation: the seam between a built trajectory and its rewards.
 * Today the evaluator runs in the gateway against the agent's still-live
 * runtime; `EvaluationTarget` is where a fresh evaluation runtime (started for
 * the verifier alone) plugs in, and `Evaluate` is where a remote evaluator
 * actor replaces the in-process call.
 */
import { errorMessage, PolarError } from "../../protocol/errors.ts";
import type { AgentRunResult, EvalResult, SessionDispatch, SessionTiming, Trajectory } from "../../protocol/schemas.ts";
import type { Runtime } from "../../runtimes/types.ts";
import { budgeted } from "./budget.ts";
import type { GatewayContext } from "./context.ts";
import type { EvalOutcome } from "./decide.ts";
import { mergeEvaluation } from "./outcome.ts";

export type EvaluatorSpec = NonNullable<SessionDispatch["evaluator"]>;

export interface EvaluationRequest {
  spec: EvaluatorSpec;
  trajectory: Trajectory;
  dispatch: SessionDispatch;
  agent: AgentRunResult | null;
  /** The agent's runtime, while it is still up. */
  runtime?: Runtime;
  /** The fresh evaluation runtime (`refresh_runtime`), started and prepared while the agent ran. */
  evalRuntime?: Runtime;
  /** What the evaluator's `collect` took from the agent's runtime before it was released. */
  collected?: unknown;
  /** A host directory for the evaluation's files (logs). */
  artifactsDir?: string;
  signal: AbortSignal;
  timeoutMs: number;
  attempt: number;
  /** Eval timing fields an evaluation measures (fresh runtime start, waiting for an evaluator actor). */
  timing: Partial<SessionTiming>;
  /** Releases the agent's runtime (once what the evaluator needs has been collected from it). */
  release?: () => Promise<void>;
}

/** Scores a trajectory; rejects with a `timeout` PolarError when the budget runs out. */
export type Evaluate = (g: GatewayContext, r: EvaluationRequest) => Promise<EvalResult>;

/** The in-process evaluator, resolved from the gateway's registry. */
export const evaluateInProcess: Evaluate = (g, r) => {
  const evaluator = g.registries.evaluators.resolve(r.spec, {});
  return budgeted(
    evaluator.evaluate({
      trajectory: r.trajectory,
      sessionId: r.dispatch.session_id,
      taskId: r.dispatch.task_id,
      agentResult: r.agent,
      runtime: r.runtime,
      evalRuntime: r.evalRuntime,
      collected: r.collected,
      artifactsDir: r.artifactsDir,
      uploadRoots: g.uploadRoots,
      env: r.spec.env,
      signal: r.signal,
      timeoutMs: r.timeoutMs,
    }),
    r.timeoutMs,
    "evaluation",
    r.signal,
  );
};

/** Evaluates and merges the rewards into the trajectory; failures become the outcome, never a throw. */
export async function evaluateTrajectory(g: GatewayContext, r: EvaluationRequest, evaluate: Evaluate = evaluateInProcess): Promise<EvalOutcome> {
  try {
    mergeEvaluation(r.trajectory, await evaluate(g, r), r.spec.strategy);
    return { kind: "scored" };
  } catch (err) {
    const timedOut = err instanceof PolarError && err.code === "timeout";
    return { kind: timedOut ? "timeout" : "failed", message: errorMessage(err) };
  }
}
