/** Hand-made CompletionRecords in the shapes engines and the proxy store them. */
import type { CompletionRecord, CompletionSession } from "../src/protocol/schemas.ts";

export interface RecordSpec {
  id: string;
  seq?: number;
  timestamp?: string;
  prompt: number[];
  sampled: number[] | null;
  /** Defaults to a deterministic logprob per sampled token; null omits logprobs. */
  logprobs?: number[] | null;
  finish?: string | null;
  messages?: Record<string, unknown>[];
  message?: Record<string, unknown>;
  tools?: Record<string, unknown>[];
  /** Where ids and logprobs sit: vLLM (default), SGLang meta_info, or prompt ids on the choice. */
  shape?: "vllm" | "sglang" | "choice_prompt";
  metadata?: Record<string, unknown>;
}

/** A deterministic, distinct, exactly representable logprob for position i of a record. */
export const lp = (seed: number, i: number) => -((((seed * 131 + i * 17) % 997) + 1) / 64);

export function hashSeed(id: string): number {
  let h = 7;
  for (const ch of id) h = (h * 31 + ch.charCodeAt(0)) % 100_003;
  return h;
}

export function record(s: RecordSpec): CompletionRecord {
  const sampled = s.sampled;
  const logprobs = s.logprobs === undefined ? sampled?.map((_, i) => lp(hashSeed(s.id), i)) ?? null : s.logprobs;
  const choice: Record<string, unknown> = {
    index: 0,
    message: s.message ?? { role: "assistant", content: `answer ${s.id}` },
    finish_reason: s.finish === undefined ? "stop" : s.finish,
  };
  const response: Record<string, unknown> = { id: `cmpl-${s.id}`, choices: [choice] };
  const shape = s.shape ?? "vllm";
  if (shape === "sglang") {
    choice.prompt_token_ids = s.prompt;
    if (sampled && logprobs) choice.meta_info = { output_token_logprobs: sampled.map((t, i) => [logprobs[i], t, null]) };
  } else {
    if (shape === "choice_prompt") choice.prompt_token_ids = s.prompt;
    else response.prompt_token_ids = s.prompt;
    choice.token_ids = sampled;
    if (logprobs) choice.logprobs = { content: logprobs.map((l, i) => ({ token: `t${i}`, token_id: sampled?.[i], logprob: l })) };
  }
  return {
    completion_id: s.id,
    timestamp: s.timestamp ?? null,
    request: { model: "m", messages: s.messages ?? [{ role: "user", content: `prompt ${s.id}` }], ...(s.tools ? { tools: s.tools } : {}) },
    original_request: {},
    response,
    metadata: { session_id: "s1", completion_role: "policy", ...(s.metadata ?? {}) },
    ...(s.seq === undefined ? {} : { seq: s.seq }),
  };
}

export function session(records: CompletionRecord[], metadata: Record<string, unknown> = {}): CompletionSession {
  return {
    session_id: "s1",
    created_at: null,
    completion_count: records.length,
    task_id: "t1",
    model_requested: "m",
    model_used: "m-served",
    api_type: "openai",
    metadata,
    completions: records,
  };
}
