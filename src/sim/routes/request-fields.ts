/**
 * Validation of the OpenAI/vLLM/SGLang request fields the simulator reads.
 * Unknown fields are accepted and ignored, as vLLM does; known fields with a
 * wrong type are a 400 naming the field.
 */
import { z } from "zod";
import { badRequest } from "../http.ts";
import { MAX_LOGPROBS } from "../logprobs.ts";

const stop = z.union([z.string(), z.array(z.string())]).nullish();

export const SamplingFields = {
  model: z.string().nullish(),
  max_tokens: z.number().int().min(1).nullish(),
  n: z.number().int().min(1).max(16).nullish(),
  seed: z.number().int().nullish(),
  stop,
  temperature: z.number().min(0).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish(), continuous_usage_stats: z.boolean().nullish() }).nullish(),
  ignore_eos: z.boolean().nullish(),
  return_token_ids: z.boolean().nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
  policy: z.string().nullish(),
  session_id: z.string().nullish(),
  user: z.string().nullish(),
  /** Output constraints; their shape is checked by structured-format.ts. */
  response_format: z.unknown().optional(),
  structured_outputs: z.unknown().optional(),
  guided_json: z.unknown().optional(),
  guided_choice: z.unknown().optional(),
};

export const ChatRequestSchema = z.looseObject({
  ...SamplingFields,
  messages: z.array(z.looseObject({ role: z.string() })).min(1),
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(MAX_LOGPROBS).nullish(),
  tools: z.array(z.looseObject({})).nullish(),
  tool_choice: z.union([z.string(), z.looseObject({})]).nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  reasoning_effort: z.string().nullish(),
  add_generation_prompt: z.boolean().nullish(),
  include_reasoning: z.boolean().nullish(),
  return_prompt_token_ids: z.boolean().nullish(),
  return_meta_info: z.boolean().nullish(),
});

export type ChatRequest = z.infer<typeof ChatRequestSchema>;

export const CompletionRequestSchema = z.looseObject({
  ...SamplingFields,
  prompt: z.union([z.string(), z.array(z.number().int().min(0)).min(1), z.array(z.string()).length(1)]),
  logprobs: z.number().int().min(0).max(MAX_LOGPROBS).nullish(),
  echo: z.boolean().nullish(),
});

export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

/** Parses a request body or throws a 400 naming the bad fields. */
export function parseRequest<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const first = r.error.issues[0];
  const list = r.error.issues.map((i) => `${i.path.join(".") || "(body)"}: ${i.message}`).join("; ");
  throw badRequest(`invalid request: ${list}`, first?.path.map(String).join(".") || null);
}

export function stopList(s: string | string[] | null | undefined): string[] {
  if (s == null) return [];
  return (Array.isArray(s) ? s : [s]).filter((x) => x.length > 0);
}
