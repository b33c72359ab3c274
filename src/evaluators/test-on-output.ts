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
import { rewardResult, runRewardCommand } from "./reward-command.ts";

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
          const { reward, r } = await runRewardCommand(runtime, c, { env, signal, timeoutMs });
          return rewardResult(name, reward, r);
        },
      };
    },
  };
}

export const testOnOutputFactory = factory("test_on_output");
/** The earlier name of `test_on_output`, kept as an alias. */
export const commandEvaluatorFactory = factory("command");

