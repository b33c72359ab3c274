import { z } from "zod";

/**
 * `prefix_merging` config (strict: an unknown key fails).
 * - `end_of_turn_token_id`: the token that closes a turn (`<|im_end|>` = 151645 for Qwen3).
 * - `tokenizer`: take the end-of-turn token from this tokenizer.
 * - `detect_end_of_turn`: when neither is given (nor a tokenizer passed by the
 *   caller), auto-detect it from the session and accept it only if it passes the
 *   checks (default true; false makes every completion its own trace).
 * - `superseded_retries`: what happens to the earlier answer of an
 *   identical-prompt retry: `"drop"` (default; recorded in `dropped`) or
 *   `"own_trace"` (emitted as a trace of its own).
 */
export const PrefixMergingConfig = z.strictObject({
  end_of_turn_token_id: z.number().int().min(0).optional(),
  tokenizer: z.enum(["qwen3"]).optional(),
  detect_end_of_turn: z.boolean().default(true),
  superseded_retries: z.enum(["drop", "own_trace"]).default("drop"),
});
export type PrefixMergingConfig = z.infer<typeof PrefixMergingConfig>;
