/**
 * The pivot format: OpenAI Chat Completions, as sent to and answered by the
 * upstream engine. Loosely typed on purpose: vendors and engines add fields,
 * and the proxy passes what it does not understand through untouched.
 */

export type Json = Record<string, unknown>;

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool";
  content: string | Json[] | null;
  name?: string;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
  reasoning_content?: string;
  [extra: string]: unknown;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: Json[];
  tool_choice?: unknown;
  stream?: boolean;
  max_tokens?: number;
  max_completion_tokens?: number;
  stop?: string | string[];
  chat_template_kwargs?: Json;
  [extra: string]: unknown;
}

export interface ChatLogprob {
  token?: string;
  logprob: number;
  token_id?: number;
  [extra: string]: unknown;
}

export interface ChatChoice {
  index: number;
  message: {
    role: "assistant";
    content: string | null;
    reasoning_content?: string | null;
    tool_calls?: ChatToolCall[] | null;
    [extra: string]: unknown;
  };
  finish_reason: string | null;
  stop_reason?: string | number | null;
  token_ids?: number[];
  logprobs?: { content: ChatLogprob[] | null; [extra: string]: unknown } | null;
  [extra: string]: unknown;
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
  [extra: string]: unknown;
}

/** An engine-normalized chat completion (see engine.ts). */
export interface ChatResponse {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: ChatChoice[];
  usage?: ChatUsage;
  prompt_token_ids?: number[];
  [extra: string]: unknown;
}

export function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
