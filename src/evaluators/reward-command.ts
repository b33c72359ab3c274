/**
 * The part `test_on_output` (alias `command`) and `fresh_command` share: run
 * the scoring command in a runtime within its timeout, and read the reward —
 * exit code 0 → 1.0, or the last stdout line as a number clamped to [0, 1]
 * (0.0 when it is not one).
 */
import { PolarError } from "../protocol/errors.ts";
import type { EvalResult } from "../protocol/schemas.ts";
import type { ExecResult, Runtime } from "../runtimes/types.ts";

export interface RewardCommand {
  command: string;
  cwd?: string;
  timeout_seconds: number;
  reward_from: "exit_code" | "stdout";
}

/** Runs the command; a timeout (not a cancel) is a typed `timeout` error. */
export async function runRewardCommand(
  runtime: Runtime,
  c: RewardCommand,
  o: { env: Record<string, string>; signal?: AbortSignal; timeoutMs: number },
): Promise<{ reward: number; r: ExecResult }> {
  const r = await runtime.exec(c.command, {
    cwd: c.cwd,
    env: o.env,
    signal: o.signal,
    timeoutMs: Math.min(o.timeoutMs, c.timeout_seconds * 1000),
    category: "eval",
  });
  if (r.timedOut && !r.cancelled) throw new PolarError("timeout", `evaluation command timed out after ${c.timeout_seconds} s`);
  return { reward: c.reward_from === "exit_code" ? (r.exitCode === 0 ? 1 : 0) : parseReward(r.stdout), r };
}

/** The EvalResult of a scoring command: its reward, exit code and output tails (plus `extra` metadata). */
export function rewardResult(mode: string, reward: number, r: ExecResult, extra: Record<string, unknown> = {}): EvalResult {
  return {
    outcome_reward: reward,
    trace_rewards: null,
    outcome_reward_components: null,
    trace_reward_components: null,
    metadata: {
      mode,
      resolved: reward === 1,
      exit_code: r.exitCode,
      ...extra,
      stdout_tail: r.stdout.slice(-2000),
      stderr_tail: r.stderr.slice(-2000),
    },
  };
}

function parseReward(stdout: string): number {
  const last = (stdout.trim().split("\n").at(-1) ?? "").trim();
  const v = Number(last);
  return Number.isFinite(v) && last !== "" ? Math.min(1, Math.max(0, v)) : 0;
}
