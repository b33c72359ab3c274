/**
 * The simulator's core, shared by every endpoint: policy choice, sampling
 * keys, context-length checks, token-level sampling and the timed emission
 * of tokens through the slot scheduler.
 */
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { IncomingMessage } from "node:http";
import { qwen3Tokenizer, type ChatTokenizer } from "../tokenizer/qwen3.ts";
import { toGeneration, type Generation } from "./generation.ts";
import { badRequest } from "./http.ts";
import { LogprobWriter } from "./logprobs.ts";
import type { PolicyName, SimOptions } from "./options.ts";
import { DEFAULT_PLAYBOOK, loadPlaybook } from "./policy/playbook.ts";
import { randomPolicy } from "./policy/random.ts";
import { scriptPolicy } from "./policy/script.ts";
import { PolicyWeights } from "./policy/weights.ts";
import type { Policy } from "./policy/types.ts";
import type { PromptContext } from "./prompt-context.ts";
import type { ToolMode } from "./qwen3-output.ts";
import { prng } from "./rng.ts";
import { constrainOutput, type OutputFormat } from "./structured-format.ts";
import { Scheduler } from "./scheduler.ts";

/** Bound on the prompt-arrival table (cleared when full). */
const MAX_SEEN_PROMPTS = 100_000;

export interface SampleParams {
  /** Policy named by the request (body `policy` or header), if any. */
  policy?: string;
  model?: string;
  /** Request seed, session identity and choice index: the sampling key. */
  seed?: number | null;
  identity?: string | null;
  choice: number;
  /** The request's explicit completion budget (policies may size their answer by it). */
  maxTokens?: number;
  /** The effective budget after the context check. */
  limit: number;
  stop: string[];
  ignoreEos: boolean;
  toolMode?: ToolMode;
  /** An output constraint (response_format, structured_outputs, guided_json): the answer text takes that form. */
  format?: OutputFormat;
}

export class SimEngine {
  readonly tok: ChatTokenizer;
  readonly logprobs: LogprobWriter;
  readonly scheduler: Scheduler;
  readonly opts: Readonly<SimOptions>;
  readonly #policies: Record<PolicyName, Policy>;
  readonly #seen = new Map<string, number>();
  policyVersion: string;
  /** The learnable policy's logits (`POST /admin/weights`). */
  readonly weights: PolicyWeights;

  constructor(opts: Readonly<SimOptions>) {
    this.opts = opts;
    this.tok = qwen3Tokenizer();
    this.logprobs = new LogprobWriter(this.tok);
    this.scheduler = new Scheduler({ slots: opts.slots, maxQueue: opts.maxQueue, windowMs: opts.metricsWindowMs });
    const playbook = opts.playbookPath ? loadPlaybook(opts.playbookPath) : DEFAULT_PLAYBOOK;
    this.weights = new PolicyWeights(playbook);
    this.#policies = {
      script: scriptPolicy(playbook),
      random: randomPolicy(this.tok, opts.randomTokens),
      learnable: scriptPolicy(playbook, this.weights),
    };
    this.policyVersion = opts.policyVersion;
  }

  policyFor(requested: string | undefined, model: string | undefined): Policy {
    const name = requested ?? (model !== undefined ? this.opts.modelPolicies[model] : undefined) ?? this.opts.policy;
    const policy = this.#policies[name as PolicyName];
    if (!policy) throw badRequest(`unknown policy ${JSON.stringify(name)}; known: ${Object.keys(this.#policies).join(", ")}`, "policy");
    return policy;
  }

  /** vLLM's context check; returns the effective max_tokens (the rest of the context when unset). */
  checkContext(promptLen: number, maxTokens: number | undefined, what = "messages"): number {
    const max = this.opts.maxModelLen;
    if (promptLen >= max) {
      throw badRequest(
        `This model's maximum context length is ${max} tokens. However, you requested ${promptLen} tokens in the ${what}, Please reduce the length of the ${what}.`,
      );
    }
    if (maxTokens === undefined) return max - promptLen;
    if (promptLen + maxTokens > max) {
      throw badRequest(
        `This model's maximum context length is ${max} tokens. However, you requested ${promptLen + maxTokens} tokens (${promptLen} in the ${what}, ${maxTokens} in the completion). Please reduce the length of the ${what} or completion.`,
      );
    }
    return maxTokens;
  }

  /**
   * The sampling identity of a request. With neither a request seed nor a
   * session identity and `unkeyed: "arrival"`, the n-th arrival of the same
   * prompt samples as "sample n": a group of identical sessions diverges, and
   * a rerun of the same server and arrival order gives the same outputs.
   */
  identityFor(promptText: string, seed: number | null | undefined, identity: string | null): string | null {
    if (seed != null || identity !== null || this.opts.unkeyed === "fixed") return identity;
    const key = createHash("sha256").update(promptText).digest("base64");
    const n = this.#seen.get(key) ?? 0;
    if (this.#seen.size >= MAX_SEEN_PROMPTS) this.#seen.clear();
    this.#seen.set(key, n + 1);
    return `arrival:${n}`;
  }

  sample(ctx: PromptContext, p: SampleParams): Generation {
    const policy = this.policyFor(p.policy, p.model);
    const key = [this.opts.seed, p.seed ?? null, p.identity ?? null, p.choice];
    let out = policy.sample({ ctx, key, maxTokens: p.maxTokens, ignoreEos: p.ignoreEos });
    if (p.format) out = constrainOutput(out, p.format, prng(...key, "structured", ctx.text));
    return toGeneration(this.tok, out, ctx.thinking, { maxTokens: p.limit, stop: p.stop, toolMode: p.format ? "none" : p.toolMode });
  }

  /**
   * Holds a slot while "generating": waits time-to-first-token (plus prefill
   * per prompt token), then calls `emit(i)` for each token at its due time
   * (one per-token delay apart, stretched by the batch slowdown).
   * Rejects with the signal's reason if the client goes away.
   */
  async run(gen: Generation, signal: AbortSignal, emit: (i: number) => void, promptTokens = 0): Promise<void> {
    const lease = await this.scheduler.acquire(signal);
    try {
      const { ttftMs, perTokenMs, prefillMsPerToken, batchSlowdown } = this.opts;
      let due = performance.now() + ttftMs + promptTokens * prefillMsPerToken;
      for (let i = 0; i < gen.ids.length; i++) {
        if (i > 0) due += perTokenMs * (1 + batchSlowdown * Math.max(0, this.scheduler.running - 1));
        const wait = due - performance.now();
        if (wait >= 1) await sleep(wait, undefined, { signal });
        signal.throwIfAborted();
        emit(i);
        this.scheduler.countTokens(1);
      }
    } finally {
      lease.release();
    }
  }

  close(): void {
    this.scheduler.close();
  }
}

/** Who is sampling: a session header, the body's session/user fields, or the bearer key. */
export function requestIdentity(req: IncomingMessage, body: Record<string, unknown>): string | null {
  const h = req.headers;
  const header = h["x-polar-session-id"] ?? h["x-session-id"];
  if (typeof header === "string" && header) return header;
  for (const k of ["session_id", "user"]) if (typeof body[k] === "string" && body[k]) return body[k] as string;
  const auth = h.authorization;
  if (typeof auth === "string" && auth.startsWith("Bearer ")) return auth.slice(7);
  return null;
}
