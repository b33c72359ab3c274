/** Evaluators score a built trajectory (rewards), possibly by running checks in a runtime. */
import type { AgentRunResult, EvalResult, RuntimeSpec, Trajectory } from "../protocol/schemas.ts";
import type { Runtime } from "../runtimes/types.ts";
import type { Factory } from "../util/registry.ts";

/** What `collect` gets: the live agent runtime, before it is released. */
export interface CollectInput {
  runtime: Runtime;
  env: Record<string, string>;
  signal: AbortSignal;
  timeoutMs: number;
}

export interface EvaluateInput {
  trajectory: Trajectory;
  sessionId: string;
  taskId: string;
  agentResult: AgentRunResult | null;
  /** The live agent runtime, when it is still up (absent once released for a fresh runtime). */
  runtime?: Runtime;
  /** A fresh runtime of the session's spec, started and prepared for evaluation (`refresh_runtime`). */
  evalRuntime?: Runtime;
  /** What `collect` took from the agent's runtime (e.g. the patch), when the evaluator has `collect`. */
  collected?: unknown;
  runtimeSpec?: RuntimeSpec;
  /** A host directory for the evaluation's files (logs); kept with the session's directory. */
  artifactsDir?: string;
  /** Host folders an evaluator may copy into a runtime from (as for prepare uploads); unset = no check. */
  uploadRoots?: readonly string[];
  env: Record<string, string>;
  signal: AbortSignal;
  timeoutMs: number;
}

export interface Evaluator {
  readonly name: string;
  /**
   * Needs no live agent runtime: with `refresh_runtime`, POSTRUN takes what
   * it needs (`collect`) and an evaluator actor evaluates in a fresh runtime.
   */
  readonly remote?: boolean;
  /**
   * Takes what evaluation needs from the agent's runtime (e.g. the patch) so
   * that runtime can be released before evaluation runs elsewhere. The value
   * must be JSON-serialisable; it comes back as `EvaluateInput.collected`.
   */
  collect?(input: CollectInput): Promise<unknown>;
  evaluate(input: EvaluateInput): Promise<EvalResult>;
}

export type EvaluatorFactory = Factory<Evaluator, Record<string, never>>;
