/** The Google Gemini dialect (`models/<m>:generateContent`, `:streamGenerateContent`, `:countTokens`). */
import type { Dialect } from "../dialect.ts";
import { googleToChat } from "./google-request.ts";
import { googleErrorReply, googleFromChat } from "./google-response.ts";
import { googleChunks, googleStream } from "./google-stream.ts";

export const google: Dialect = {
  apiType: "google",
  modelOf: (body) => (typeof body.model === "string" ? body.model.replace(/^models\//, "") : "gemini-pro"),
  wantsStream: (body) => body._streaming === true,
  toChat: (body, ctx) => googleToChat(body, ctx),
  fromChat: (resp, _body, ctx) => googleFromChat(resp, ctx.modelRequested),
  toStream: (resp, _body, ctx) =>
    ctx.query.get("alt") === "sse" ? googleStream(resp, ctx.modelRequested) : JSON.stringify(googleChunks(resp, ctx.modelRequested)),
  streamContentType: (ctx) => (ctx.query.get("alt") === "sse" ? undefined : "application/json"),
  counting: {
    toChat: (body, ctx) => googleToChat(body, ctx, true),
    reply: (tokens) => ({ totalTokens: tokens }),
  },
  errorReply: googleErrorReply,
};
