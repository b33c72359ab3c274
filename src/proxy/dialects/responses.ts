/** The OpenAI Responses dialect (`/v1/responses`). Errors use OpenAI's body. */
import type { Json } from "../chat-types.ts";
import type { Dialect } from "../dialect.ts";
import { openaiErrorReply } from "./openai-error.ts";
import { responsesToChat } from "./responses-request.ts";
import { responsesFromChat } from "./responses-response.ts";
import { responsesStream } from "./responses-stream.ts";

export const responses: Dialect = {
  apiType: "openai_responses",
  modelOf: (body: Json) => (typeof body.model === "string" ? body.model : "unknown"),
  wantsStream: (body: Json) => body.stream === true,
  toChat: responsesToChat,
  fromChat: (resp, body, ctx) => responsesFromChat(resp, body, ctx.modelRequested),
  toStream: (resp, body, ctx) => responsesStream(resp, body, ctx.modelRequested),
  errorReply: openaiErrorReply,
};
