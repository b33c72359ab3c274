/** The dialect of each API type. */
import type { ApiType, Dialect } from "../dialect.ts";
import { openaiChat } from "./openai-chat.ts";

const DIALECTS: Partial<Record<ApiType, Dialect>> = {
  openai_chat: openaiChat,
};

export function dialectOf(apiType: ApiType): Dialect | undefined {
  return DIALECTS[apiType];
}
