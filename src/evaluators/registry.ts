import { Registry } from "../util/registry.ts";
import { commandEvaluatorFactory } from "./command.ts";
import { sessionCompletedFactory } from "./session-completed.ts";
import type { Evaluator } from "./types.ts";

export function createEvaluatorRegistry(): Registry<Evaluator, Record<string, never>> {
  return new Registry<Evaluator, Record<string, never>>("evaluator", [sessionCompletedFactory, commandEvaluatorFactory]);
}
