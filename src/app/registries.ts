/** The registries of one process, created at start-up and passed down. */
import { createBuilderRegistry } from "../builders/registry.ts";
import { createEvaluatorRegistry } from "../evaluators/registry.ts";
import { createHarnessRegistry } from "../harnesses/registry.ts";
import { createRuntimeRegistry } from "../runtimes/registry.ts";
import type { GatewayRegistries } from "../actors/gateway/context.ts";
import type { SpecChecker } from "../actors/supervisor/tasks.ts";
import { ValidationError, PolarError, type FieldIssue } from "../protocol/errors.ts";

export function createRegistries(): GatewayRegistries {
  return {
    builders: createBuilderRegistry(),
    runtimes: createRuntimeRegistry(),
    harnesses: createHarnessRegistry(),
    evaluators: createEvaluatorRegistry(),
  };
}

/** Submit-time check of a task's strategy names and configs, naming every bad field. */
export function specChecker(r: GatewayRegistries): SpecChecker {
  return (task) => {
    const issues: FieldIssue[] = [];
    const run = (path: string, f: () => unknown, configName = "config") => {
      try {
        f();
      } catch (err) {
        if (err instanceof ValidationError) issues.push(...err.issues.map((i) => ({ path: `${path}.${i.path.replace(/^config/, configName)}`, message: i.message })));
        else if (err instanceof PolarError) issues.push({ path: `${path}.strategy`, message: err.message });
        else throw err;
      }
    };
    run("builder", () => r.builders.check(task.builder));
    if (task.evaluator) run("evaluator", () => r.evaluators.check(task.evaluator!));
    if (task.agent.harness) run("agent", () => r.harnesses.check({ strategy: task.agent.harness!, config: task.agent.settings }), "settings");
    if (task.runtime && !r.runtimes.has(task.runtime.backend)) {
      issues.push({ path: "runtime.backend", message: `unknown runtime; known: ${r.runtimes.names().join(", ")}` });
    }
    if (issues.length) throw new ValidationError("task", issues);
  };
}
