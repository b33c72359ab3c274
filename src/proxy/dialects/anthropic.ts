/** The Anthropic Messages dialect (`/v1/messages`, also `?beta=true`). */
import type { Json } from "../chat-types.ts";
import type { Dialect } from "../dialect.ts";
import { anthropicToChat } from "./anthropic-request.ts";
import { anthropicErrorReply, anthropicFromChat } from "./anthropic-response.ts";
import { anthropicStream } from "./anthropic-stream.ts";

export const anthropic: Dialect = {
  apiType: "anthropic",
  modelOf: (body: Json) => (typeof body.model === "string" ? body.model : "claude-3"),
  wantsStream: (body: Json) => body.stream === true,
  toChat: (body, ctx) => anthropicToChat(body, ctx),
  fromChat: (resp, body, ctx) => anthropicFromChat(resp, body, ctx.modelRequested),
  toStream: (resp, body, ctx) => anthropicStream(resp, body, ctx.modelRequested),
  counting: {
    toChat: (body, ctx) => anthropicToChat(body, ctx, true),
    reply: (tokens) => ({ input_tokens: tokens }),
  },
  errorReply: anthropicErrorReply,
};
