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
        const r = await evalRuntime.exec(c.command, {
          cwd: c.cwd,
          env: { ...env, POLAR_EVAL_INPUT: input },
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
            mode: "fresh_command",
            resolved: reward === 1,
            exit_code: r.exitCode,
            collected_bytes: output.length,
            stdout_tail: r.stdout.slice(-2000),
            stderr_tail: r.stderr.slice(-2000),
          },
        };
      },
    };
  },
};

function parseReward(stdout: string): number {
  const last = (stdout.trim().split("\n").at(-1) ?? "").trim();
  const v = Number(last);
  return Number.isFinite(v) && last !== "" ? Math.min(1, Math.max(0, v)) : 0;
}
