/**
 * A sampled completion at token level. Structured policy answers are rendered
 * to Qwen3 output text and tokenized with the real tokenizer; the answer's
 * log-probability is spread evenly over its tokens, so the logprobs of a
 * complete answer sum to ln(p) of the sampled choice. `max_tokens` truncates
 * at token level (finish reason "length"); a stop string cuts after the token
 * that completes it.
 */
import type { ChatTokenizer } from "../tokenizer/qwen3.ts";
import type { PolicyOutput } from "./policy/types.ts";
import { renderOutput, type ToolMode } from "./qwen3-output.ts";

export type FinishReason = "stop" | "length";

export interface Generation {
  ids: number[];
  logprobs: number[];
  finish: FinishReason;
  /** The matched stop string, or null (EOS stops report null, as vLLM does). */
  stopReason: string | null;
}

export interface GenerationLimits {
  maxTokens: number;
  stop: string[];
  toolMode?: ToolMode;
}

export function toGeneration(tok: ChatTokenizer, out: PolicyOutput, thinking: boolean, limits: GenerationLimits): Generation {
  let ids: number[];
  let logprobs: number[];
  if (out.kind === "tokens") {
    ids = out.ids;
    logprobs = out.logprobs;
  } else {
    ids = tok.encode(renderOutput(out, thinking, limits.toolMode));
    const each = out.logprob / ids.length;
    logprobs = ids.map(() => each);
  }
  const stopAt = findStop(tok, ids, limits.stop);
  if (stopAt && stopAt.index < limits.maxTokens) {
    return { ids: ids.slice(0, stopAt.index + 1), logprobs: logprobs.slice(0, stopAt.index + 1), finish: "stop", stopReason: stopAt.stop };
  }
  if (ids.length > limits.maxTokens) {
    return { ids: ids.slice(0, limits.maxTokens), logprobs: logprobs.slice(0, limits.maxTokens), finish: "length", stopReason: null };
  }
  const natural = ids.at(-1) === tok.eotTokenId;
  return { ids, logprobs, finish: natural ? "stop" : "length", stopReason: null };
}

/** The first token index whose text completes one of the stop strings. */
function findStop(tok: ChatTokenizer, ids: readonly number[], stops: readonly string[]): { index: number; stop: string } | undefined {
  if (!stops.length) return undefined;
  let text = "";
  for (let i = 0; i < ids.length; i++) {
    if (ids[i] === tok.eotTokenId) return undefined;
    text += tok.tokenText(ids[i]);
    const stop = stops.find((s) => s && text.includes(s));
    if (stop) return { index: i, stop };
  }
  return undefined;
}

/** Output text as vLLM returns it: special tokens (the EOS) skipped, a matched stop string cut off. */
export function outputText(tok: ChatTokenizer, gen: Generation): string {
  const text = tok.decode(gen.ids, { skipSpecialTokens: true });
  if (gen.stopReason === null) return text;
  const at = text.indexOf(gen.stopReason);
  return at < 0 ? text : text.slice(0, at);
}
