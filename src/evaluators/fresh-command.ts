/**
 * `fresh_command`: a remote evaluator. POSTRUN runs `collect_command` in the
 * agent's runtime and keeps its stdout (e.g. `git diff`); an evaluator actor
 * then starts a fresh runtime of the session's spec (prepared with
 * `eval_prepare`, else `prepare`), writes that output to a file
 * (`$POLAR_EVAL_INPUT`) and runs `command` there. Reward as `command`'s:
 * exit code 0 → 1.0, or the last stdout line as a number clamped to [0, 1].
 */
import { z } from "zod";
import { PolarError } from "../protocol/errors.ts";
import type { EvaluatorFactory } from "./types.ts";
import { rewardResult, runRewardCommand } from "./reward-command.ts";

const MAX_COLLECTED = 8 * 1024 * 1024;

const Config = z.strictObject({
  collect_command: z.string().min(1).max(65_536),
  command: z.string().min(1).max(65_536),
  cwd: z.string().max(4096).optional(),
  timeout_seconds: z.number().positive().max(86_400).default(120),
  reward_from: z.enum(["exit_code", "stdout"]).default("exit_code"),
});

export const freshCommandFactory: EvaluatorFactory = {
  name: "fresh_command",
  configSchema: Config,
  create(config) {
    const c = config as z.infer<typeof Config>;
    return {
      name: "fresh_command",
      remote: true,
      async collect({ runtime, env, signal, timeoutMs }) {
        const r = await runtime.exec(c.collect_command, { cwd: c.cwd, env, signal, timeoutMs: Math.min(timeoutMs, c.timeout_seconds * 1000), category: "eval" });
        if (r.timedOut && !r.cancelled) throw new PolarError("timeout", `collect_command timed out after ${c.timeout_seconds} s`);
        if (r.exitCode !== 0) throw new PolarError("evaluator", `collect_command exited with code ${r.exitCode}: ${r.stderr.slice(-500)}`);
        if (r.stdout.length > MAX_COLLECTED) throw new PolarError("evaluator", `collect_command printed ${r.stdout.length} bytes (limit ${MAX_COLLECTED})`);
        return { output: r.stdout };
      },
      async evaluate({ evalRuntime, collected, env, signal, timeoutMs }) {
        if (!evalRuntime) throw new PolarError("evaluator", "fresh_command needs a fresh runtime: set evaluator.refresh_runtime to true");
        const output = typeof (collected as { output?: unknown } | undefined)?.output === "string" ? (collected as { output: string }).output : "";
        const input = `${evalRuntime.workdir.replace(/\/$/, "")}/.polar-eval-input`;
        await evalRuntime.writeFile(input, output);
        const { reward, r } = await runRewardCommand(evalRuntime, c, { env: { ...env, POLAR_EVAL_INPUT: input }, signal, timeoutMs });
        return rewardResult("fresh_command", reward, r, { collected_bytes: output.length });
      },
    };
  },
};

