/**
 * OpenAI/vLLM logprob entries. The sampled token carries the policy's
 * logprob; `top_logprobs` lists it with other tokens that share the rest of
 * the probability mass, so each position's probabilities never sum above 1.
 */
import type { ChatTokenizer } from "../tokenizer/qwen3.ts";
import { prng } from "./rng.ts";

export interface TopLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

export interface LogprobEntry extends TopLogprob {
  top_logprobs: TopLogprob[];
}

/** vLLM's max_logprobs default. */
export const MAX_LOGPROBS = 20;

const FILLER_WORDS = " the a of and to in is that it for on with as was at by an be this from or are have not but".split(" ");

export class LogprobWriter {
  readonly #tok: ChatTokenizer;
  readonly #fillers: number[];

  constructor(tok: ChatTokenizer) {
    this.#tok = tok;
    this.#fillers = [...new Set(FILLER_WORDS.filter(Boolean).flatMap((w) => tok.encode(` ${w}`)))];
  }

  /** The token's display form: decoded text, or `token_id:N` (return_tokens_as_token_ids). */
  tokenString(id: number, asIds: boolean): string {
    return asIds ? `token_id:${id}` : this.#tok.tokenText(id);
  }

  entry(id: number, logprob: number, top: number, asIds: boolean, position: number): LogprobEntry {
    const self = this.#top(id, logprob, asIds);
    return { ...self, top_logprobs: top > 0 ? this.#alternatives(id, logprob, top, asIds, position, self) : [] };
  }

  #top(id: number, logprob: number, asIds: boolean): TopLogprob {
    const token = this.tokenString(id, asIds);
    return { token, logprob: Math.max(logprob, -9999), bytes: [...Buffer.from(this.#tok.tokenText(id), "utf8")] };
  }

  #alternatives(id: number, logprob: number, top: number, asIds: boolean, position: number, self: TopLogprob): TopLogprob[] {
    const others = top - 1;
    const rest = Math.max(1 - Math.exp(logprob), 1e-9);
    const lp = Math.log(rest / Math.max(others, 1));
    const rand = prng("top", id, position);
    const picked = new Set<number>([id]);
    const out: TopLogprob[] = [self];
    while (out.length < top && picked.size <= this.#fillers.length) {
      const alt = this.#fillers[Math.floor(rand() * this.#fillers.length)];
      if (picked.has(alt)) continue;
      picked.add(alt);
      out.push(this.#top(alt, lp, asIds));
    }
    return out.sort((a, b) => b.logprob - a.logprob);
  }
}
