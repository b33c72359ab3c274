/**
 * Finish/stop reasons: the one mapping table from the upstream's OpenAI chat
 * `finish_reason` to each vendor's field (PROTOCOLS.md §8), and back for the
 * requests that carry history.
 */

export interface FinishMapping {
  anthropic: string;
  /** Responses: the response status and, for incomplete ones, the reason. */
  responses: { status: "completed" | "incomplete" | "failed"; reason?: string };
  google: string;
}

export const FINISH_TABLE: Readonly<Record<string, FinishMapping>> = {
  stop: { anthropic: "end_turn", responses: { status: "completed" }, google: "STOP" },
  length: { anthropic: "max_tokens", responses: { status: "incomplete", reason: "max_output_tokens" }, google: "MAX_TOKENS" },
  tool_calls: { anthropic: "tool_use", responses: { status: "completed" }, google: "STOP" },
  function_call: { anthropic: "tool_use", responses: { status: "completed" }, google: "STOP" },
  content_filter: { anthropic: "refusal", responses: { status: "incomplete", reason: "content_filter" }, google: "SAFETY" },
  abort: { anthropic: "end_turn", responses: { status: "failed" }, google: "OTHER" },
};

const DEFAULT_MAPPING = FINISH_TABLE.stop;

export function finishMapping(finish: string | null | undefined): FinishMapping {
  return (finish && FINISH_TABLE[finish]) || DEFAULT_MAPPING;
}

/**
 * Anthropic's stop_reason; `stop_sequence` when the engine reports that a
 * client stop string matched (vLLM `stop_reason` holds the string).
 */
export function anthropicStopReason(
  finish: string | null | undefined,
  matched: unknown,
  stopSequences: readonly string[],
): { stop_reason: string; stop_sequence: string | null } {
  if (finish === "stop" && typeof matched === "string" && stopSequences.includes(matched)) {
    return { stop_reason: "stop_sequence", stop_sequence: matched };
  }
  return { stop_reason: finishMapping(finish).anthropic, stop_sequence: null };
}
