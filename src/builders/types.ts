/**
 * Trajectory builders turn one captured CompletionSession into a Trajectory.
 * They are pure functions of their input (no I/O, no clocks): the same session
 * always yields the same trajectory, so a stored session can be rebuilt later
 * with another strategy.
 */
import type { CompletionSession, Trajectory } from "../protocol/schemas.ts";
import type { ChatTokenizer } from "../tokenizer/qwen3.ts";
import type { Factory } from "../util/registry.ts";

export interface TrajectoryBuilder {
  readonly name: string;
  build(session: CompletionSession): Trajectory;
}

export interface BuilderDeps {
  /** The model's tokenizer, when one is known (used for EOT detection and fallbacks). */
  tokenizer?: ChatTokenizer;
}

export type BuilderFactory = Factory<TrajectoryBuilder, BuilderDeps>;
