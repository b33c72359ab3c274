/**
 * Fitting a request to the engine's context. Agent CLIs ask for as many
 * output tokens as their vendor's model allows (Claude Code: 32,000) whatever
 * the engine behind the proxy can hold; vLLM then refuses the call when
 * prompt + max_tokens exceeds its `max_model_len`. The proxy learns each
 * upstream's `max_model_len` from `GET /v1/models` (vLLM and the sim report
 * it in `data[].max_model_len`) and lowers the output-token request so that
 * prompt + output fits, recording the original and the clamped value.
 *
 * The prompt is only counted (the engine's `/tokenize`) when a cheap upper
 * bound says it might not fit: a token is at least one byte of the request,
 * plus a margin for what the chat template adds.
 */
import type { ChatRequest } from "./chat-types.ts";
import { isObject } from "./chat-types.ts";
import type { UpstreamPool } from "./upstream.ts";

/** Tokens the chat template may add beyond the request's own bytes (role markers, the tool preamble). */
export const TEMPLATE_MARGIN_TOKENS = 2048;
/** A failed lookup is retried after this long. */
const RETRY_MS = 30_000;

export interface OutputClamp {
  /** The fields lowered (`max_tokens`, `max_completion_tokens`). */
  fields: string[];
  /** The largest output-token value the client asked for. */
  original: number;
  clamped: number;
  prompt_tokens: number;
  max_model_len: number;
}

/** The smallest `max_model_len` the upstreams report (a call may go to any of them), learned once. */
export class ContextLimit {
  #value: Promise<number | undefined> | undefined;
  #failedAt: number | undefined;

  constructor(
    private readonly upstream: Pick<UpstreamPool, "getAll">,
    private readonly now: () => number = Date.now,
  ) {}

  get(): Promise<number | undefined> {
    if (this.#value && this.#failedAt !== undefined && this.now() - this.#failedAt > RETRY_MS) this.#value = undefined;
    this.#value ??= this.#learn();
    return this.#value;
  }

  async #learn(): Promise<number | undefined> {
    const replies = await this.upstream.getAll("/v1/models");
    const lens = replies.flatMap((r) => (r.body ? modelLens(r.body) : []));
    this.#failedAt = lens.length ? undefined : this.now();
    return lens.length ? Math.min(...lens) : undefined;
  }
}

function modelLens(body: Record<string, unknown>): number[] {
  const data = Array.isArray(body.data) ? body.data : [];
  return data.flatMap((m) => (isObject(m) && typeof m.max_model_len === "number" && m.max_model_len > 0 ? [m.max_model_len] : []));
}

const FIELDS = ["max_tokens", "max_completion_tokens"] as const;

/**
 * Lowers the request's output-token fields (in place) so prompt + output fits
 * `maxModelLen`; returns what it did, or undefined when nothing was needed or
 * possible (no limit known, no output request, or a prompt that alone fills
 * the context — the engine then refuses it with its own context error).
 */
export async function fitOutputTokens(
  req: ChatRequest,
  requestBytes: number,
  maxModelLen: number | undefined,
  countPrompt: (req: ChatRequest) => Promise<number>,
): Promise<OutputClamp | undefined> {
  if (!maxModelLen) return undefined;
  const present = FIELDS.filter((f) => typeof req[f] === "number" && Number.isFinite(req[f]));
  if (!present.length) return undefined;
  const requested = Math.max(...present.map((f) => req[f] as number));
  if (requested + requestBytes + TEMPLATE_MARGIN_TOKENS <= maxModelLen) return undefined;
  const promptTokens = await countPrompt(req);
  const room = maxModelLen - promptTokens;
  if (room < 1 || requested <= room) return undefined;
  const fields = present.filter((f) => (req[f] as number) > room);
  for (const f of fields) req[f] = room;
  return { fields, original: requested, clamped: room, prompt_tokens: promptTokens, max_model_len: maxModelLen };
}
