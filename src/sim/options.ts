/**
 * Options of the inference simulator, one strict zod schema parsed once by
 * `startSim`. Timing defaults are zero so tests run fast unless they ask for
 * a load model.
 */
import { z } from "zod";
import { validate } from "../protocol/index.ts";

export const POLICY_NAMES = ["script", "random", "learnable"] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

export const SimOptionsSchema = z.strictObject({
  host: z.string().default("127.0.0.1"),
  /** 0 picks a free port. */
  port: z.number().int().min(0).max(65535).default(0),
  /** The served model name (listed by /v1/models). Requests may name any model. */
  modelName: z.string().min(1).default("Qwen/Qwen3-8B"),
  /** The default policy; a request may pick another with `policy` (body) or `x-sim-policy` (header). */
  policy: z.enum(POLICY_NAMES).default("script"),
  /** Policy per requested model name, e.g. {"random-model": "random"}. */
  modelPolicies: z.record(z.string(), z.enum(POLICY_NAMES)).default({}),
  /** Playbook file (JSON) for the script policy; the built-in default playbook when absent. */
  playbookPath: z.string().optional(),
  /** Server seed: mixed into every sampling decision. */
  seed: z.number().int().default(0),
  /** Concurrent generation slots ("GPU batch size"); further requests queue. */
  slots: z.number().int().min(1).default(64),
  /** Queued requests beyond this get 503 (bounded queue). */
  maxQueue: z.number().int().min(0).default(10_000),
  /** Time to first token, per request, once it holds a slot. */
  ttftMs: z.number().min(0).default(0),
  /** Delay per generated token after the first. */
  perTokenMs: z.number().min(0).default(0),
  /** Extra prefill time per prompt token (time to first token grows with the prompt). */
  prefillMsPerToken: z.number().min(0).default(0),
  /** Per-token delay grows by this fraction for each other running request (batching slows decoding). */
  batchSlowdown: z.number().min(0).default(0),
  /** Max model length (prompt + completion), as vLLM's --max-model-len. */
  maxModelLen: z.number().int().min(16).default(40960),
  /** Default completion length of the random policy when the request sets no max_tokens. */
  randomTokens: z.number().int().min(1).default(64),
  /** Window for the windowed busy fraction and tokens/s in /metrics. */
  metricsWindowMs: z.number().int().min(100).default(10_000),
  /**
   * How requests with neither a seed nor a session identity sample: "fixed"
   * (the same request always gets the same answer) or "arrival" (the n-th
   * arrival of the same prompt samples as sample n, so identical sessions diverge).
   */
  unkeyed: z.enum(["fixed", "arrival"]).default("fixed"),
  /** Initial policy version stamped on every answer. */
  policyVersion: z.string().default("0"),
  /** Largest accepted request body. */
  maxBodyBytes: z.number().int().min(1024).default(32 * 1024 * 1024),
});

export type SimOptions = z.infer<typeof SimOptionsSchema>;

export function parseSimOptions(input: unknown): Readonly<SimOptions> {
  return Object.freeze(validate(SimOptionsSchema, input ?? {}, "sim options"));
}
