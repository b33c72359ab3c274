/**
 * The random policy, for load tests: plain English words sampled uniformly
 * (seeded) from a list of single-token words, so every token's logprob is
 * -ln(K) for a list of K words. The answer has `max_tokens` tokens (or the
 * configured default), the last one being `<|im_end|>` unless the request
 * sets ignore_eos.
 */
import type { ChatTokenizer } from "../../tokenizer/qwen3.ts";
import { prng } from "../rng.ts";
import type { Policy, SampleRequest, TokenOutput } from "./types.ts";

const WORDS = `time year people way day man thing woman life child world school state family student group country problem
hand part place case week company system program question work government number night point home water room mother
area money story fact month lot right study book eye job word business issue side kind head house service friend
father power hour game line end member law car city community name president team minute idea kid body information
back parent face others level office door health person art war history party result change morning reason research
girl guy moment air teacher force education foot boy age policy music market sense nation plan college interest death
experience effect class control care field development role effort rate heart drug show leader light voice wife police
mind price report decision son view relationship town road arm difference value building action model season society
tax director position player record paper space ground form event official matter center couple site project activity
star table need court oil situation cost industry figure street image phone data picture practice piece land product
doctor wall patient worker news test movie north love support technology step baby computer type attention film tree
source organization hair window evidence population site bank green red blue small large good new old great high long`
  .split(/\s+/)
  .filter(Boolean);

export function randomPolicy(tok: ChatTokenizer, defaultTokens: number): Policy {
  const ids = [...new Set(WORDS.map((w) => tok.encode(` ${w}`)).filter((x) => x.length === 1).map((x) => x[0]))];
  const logprob = -Math.log(ids.length);
  return {
    name: "random",
    sample(req: SampleRequest): TokenOutput {
      const n = Math.max(1, req.maxTokens ?? defaultTokens);
      const rand = prng(...req.key, "random", req.ctx.text);
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push(ids[Math.floor(rand() * ids.length)]);
      if (!req.ignoreEos) out[n - 1] = tok.eotTokenId;
      return { kind: "tokens", ids: out, logprobs: out.map(() => logprob) };
    },
  };
}
