/** Evaluators score a built trajectory (rewards), possibly by running checks in the runtime. */
import type { AgentRunResult, EvalResult, Trajectory } from "../protocol/schemas.ts";
import type { Runtime } from "../runtimes/types.ts";
import type { Factory } from "../util/registry.ts";

export interface EvaluateInput {
  trajectory: Trajectory;
  sessionId: string;
  taskId: string;
  agentResult: AgentRunResult | null;
  /** The live agent runtime, when it is still up. */
  runtime?: Runtime;
  env: Record<string, string>;
  signal: AbortSignal;
  timeoutMs: number;
}

export interface Evaluator {
  readonly name: string;
  evaluate(input: EvaluateInput): Promise<EvalResult>;
}

export type EvaluatorFactory = Factory<Evaluator, Record<string, never>>;
