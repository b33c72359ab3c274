/**
 * `test_on_output` (alias `command`): scores the session by running a check
 * in the live agent runtime after the agent finished (before it is torn down).
 * - `reward_from: "exit_code"` (default): 1.0 when the command exits 0, else 0.0.
 * - `reward_from: "stdout"`: the last line of stdout as a number, clamped to [0, 1]
 *   (0.0 when it is not a number).
 * The command's output tail and exit code go into the evaluation metadata.
 */
import { z } from "zod";
import { PolarError } from "../protocol/errors.ts";
import type { EvaluatorFactory } from "./types.ts";

const Config = z.strictObject({
  command: z.string().min(1),
  cwd: z.string().optional(),
  timeout_seconds: z.number().positive().default(120),
  reward_from: z.enum(["exit_code", "stdout"]).default("exit_code"),
});

function factory(name: string): EvaluatorFactory {
  return {
    name,
    configSchema: Config,
    create(config) {
      const c = config as z.infer<typeof Config>;
      return {
        name,
        async evaluate({ runtime, env, signal, timeoutMs }) {
          if (!runtime) throw new PolarError("evaluator", `the ${name} evaluator needs the agent's runtime, which is gone`);
          const r = await runtime.exec(c.command, {
            cwd: c.cwd,
            env,
            signal,
            timeoutMs: Math.min(timeoutMs, c.timeout_seconds * 1000),
            category: "eval",
          });
          if (r.timedOut && !r.cancelled) throw new PolarError("timeout", `evaluation command timed out after ${c.timeout_seconds} s`);
          const reward = c.reward_from === "exit_code" ? (r.exitCode === 0 ? 1 : 0) : parseReward(r.stdout);
          return {
            outcome_reward: reward,
            trace_rewards: null,
            outcome_reward_components: null,
            trace_reward_components: null,
            metadata: {
              mode: name,
              resolved: reward === 1,
              exit_code: r.exitCode,
              stdout_tail: r.stdout.slice(-2000),
              stderr_tail: r.stderr.slice(-2000),
            },
          };
        },
      };
    },
  };
}

export const testOnOutputFactory = factory("test_on_output");
/** The earlier name of `test_on_output`, kept as an alias. */
export const commandEvaluatorFactory = factory("command");

function parseReward(stdout: string): number {
  const last = stdout.trim().split("\n").at(-1) ?? "";
  const v = Number(last.trim());
  return Number.isFinite(v) && last.trim() !== "" ? Math.min(1, Math.max(0, v)) : 0;
}
