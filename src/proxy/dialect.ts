/**
 * A vendor dialect: how one vendor API converts to and from the OpenAI Chat
 * Completions pivot, streams an answer, and shapes its errors. One dialect
 * per vendor, each in its own files under dialects/.
 */
import type { PolarError } from "../protocol/errors.ts";
import type { ChatRequest, ChatResponse, Json } from "./chat-types.ts";

export type ApiType = "openai_chat" | "openai_responses" | "anthropic" | "google";

/** What a dialect knows about the call it converts. */
export interface CallContext {
  apiType: ApiType;
  /** Request path with any /s/<credential> prefix removed, without the query. */
  path: string;
  query: URLSearchParams;
  /** The model name the client asked for (echoed back in answers). */
  modelRequested: string;
  /** The model name the upstream serves. */
  modelServed: string;
}

export interface ErrorReply {
  status: number;
  body: Json;
  headers?: Record<string, string>;
}

export interface Dialect {
  readonly apiType: ApiType;
  /** The model the client named (from the body or the path). */
  modelOf(body: Json, ctx: CallContext): string;
  /** True when the client asked for a streamed answer. */
  wantsStream(body: Json, ctx: CallContext): boolean;
  /** Client body to an OpenAI chat request (model set to the served one). Throws ValidationError on a wrong shape. */
  toChat(body: Json, ctx: CallContext): ChatRequest;
  /** Normalized upstream answer to the client's non-streamed body. Must not modify `resp` (the stored record holds it). */
  fromChat(resp: ChatResponse, body: Json, ctx: CallContext): Json;
  /** Content type of `toStream`'s text when it is not SSE (Google's JSON-array stream). */
  streamContentType?(ctx: CallContext): string | undefined;
  /** Normalized upstream answer as one complete SSE text in the client's dialect. */
  toStream(resp: ChatResponse, body: Json, ctx: CallContext): string;
  /** Token counting (Anthropic count_tokens, Google countTokens): the body as a chat request, and the answer. */
  readonly counting?: {
    toChat(body: Json, ctx: CallContext): ChatRequest;
    reply(tokens: number): Json;
  };
  /** A failure as the vendor's error body. */
  errorReply(err: PolarError, ctx: { apiType: ApiType }): ErrorReply;
}
