import { Registry } from "../util/registry.ts";
import { freshCommandFactory } from "./fresh-command.ts";
import { harborFactory } from "./harbor.ts";
import { sessionCompletedFactory } from "./session-completed.ts";
import { swebenchHarnessFactory } from "./swebench/evaluator.ts";
import { commandEvaluatorFactory, testOnOutputFactory } from "./test-on-output.ts";
import type { Evaluator } from "./types.ts";

export function createEvaluatorRegistry(): Registry<Evaluator, Record<string, never>> {
  return new Registry<Evaluator, Record<string, never>>("evaluator", [
    sessionCompletedFactory,
    testOnOutputFactory,
    commandEvaluatorFactory,
    swebenchHarnessFactory,
    harborFactory,
    freshCommandFactory,
  ]);
}
