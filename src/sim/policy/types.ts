/**
 * A policy decides what the simulated model says, from the prompt alone.
 * It returns either a structured answer (rendered to Qwen3 output text and
 * tokenized) or raw token ids with their logprobs.
 */
import type { PromptContext } from "../prompt-context.ts";

export interface ToolCallOut {
  name: string;
  arguments: Record<string, unknown>;
}

/** A structured answer; `logprob` is the log-probability of the sampled choice (0 when deterministic). */
export interface StructuredOutput {
  kind: "structured";
  think?: string;
  content: string;
  toolCalls: ToolCallOut[];
  logprob: number;
}

/** Raw sampled tokens (the random policy), each with its logprob. */
export interface TokenOutput {
  kind: "tokens";
  ids: number[];
  logprobs: number[];
}

export type PolicyOutput = StructuredOutput | TokenOutput;

export interface SampleRequest {
  ctx: PromptContext;
  /** Identity of the sampling stream: server seed, request seed, session key. */
  key: readonly unknown[];
  /** The request's completion budget, if it set one. */
  maxTokens?: number;
  /** Keep generating past the end-of-turn token (vLLM's ignore_eos). */
  ignoreEos?: boolean;
}

export interface Policy {
  readonly name: string;
  sample(req: SampleRequest): PolicyOutput;
}
