/**
 * Token counting for Anthropic count_tokens and Google countTokens: the
 * engine's chat `/tokenize` (vLLM renders the same template it generates
 * with), else the local Qwen3 tokenizer and chat template.
 */
import type { ChatRequest } from "./chat-types.ts";
import { renameReasoning } from "./engine.ts";
import type { UpstreamFlavor } from "./types.ts";
import type { UpstreamPool } from "./upstream.ts";

export async function countTokens(upstream: UpstreamPool, flavor: UpstreamFlavor, req: ChatRequest, signal?: AbortSignal): Promise<number> {
  if (flavor === "vllm") {
    const payload = {
      model: req.model, messages: req.messages.map(renameReasoning), add_generation_prompt: true,
      ...(req.tools ? { tools: req.tools } : {}),
      ...(req.chat_template_kwargs ? { chat_template_kwargs: req.chat_template_kwargs } : {}),
    };
    try {
      const reply = await upstream.post("/tokenize", JSON.stringify(payload), signal);
      if (typeof reply.body.count === "number") return reply.body.count;
    } catch {
      // an engine without /tokenize: fall back to the local template
    }
  }
  return localCount(req);
}

async function localCount(req: ChatRequest): Promise<number> {
  const { qwen3Tokenizer } = await import("../tokenizer/qwen3.ts");
  return qwen3Tokenizer().tokenizeChat(req.messages as Record<string, unknown>[], {
    tools: req.tools ?? null, addGenerationPrompt: true, chatTemplateKwargs: req.chat_template_kwargs ?? null,
  }).length;
}
