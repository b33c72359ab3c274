/** The dialect of each API type. */
import type { ApiType, Dialect } from "../dialect.ts";
import { anthropic } from "./anthropic.ts";
import { google } from "./google.ts";
import { openaiChat } from "./openai-chat.ts";
import { responses } from "./responses.ts";

const DIALECTS: Record<ApiType, Dialect> = {
  openai_chat: openaiChat,
  openai_responses: responses,
  anthropic,
  google,
};

export function dialectOf(apiType: ApiType): Dialect {
  return DIALECTS[apiType];
}
