/**
 * Turns a chat request into prompt ids (the real Qwen3 template, as vLLM
 * renders it) and one sampled, parsed generation per choice.
 */
import type { IncomingMessage } from "node:http";
import { randomUUID } from "node:crypto";
import { requestIdentity, type SimEngine } from "../engine.ts";
import { outputText, type Generation } from "../generation.ts";
import { badRequest } from "../http.ts";
import { readPrompt } from "../prompt-context.ts";
import { parseOutput, type ParsedOutput, type ToolMode } from "../qwen3-output.ts";
import { outputFormatOf } from "../structured-format.ts";
import { ChatRequestSchema, parseRequest, stopList, type ChatRequest } from "./request-fields.ts";

export interface ChatChoice {
  index: number;
  gen: Generation;
  parsed: ParsedOutput;
  toolIds: string[];
  finishReason: "stop" | "length" | "tool_calls";
  toolMode: ToolMode;
}

export interface PreparedChat {
  req: ChatRequest;
  promptIds: number[];
  choices: ChatChoice[];
  /** The request uses SGLang-only fields (per-choice prompt ids, meta_info). */
  sglang: boolean;
}

export function prepareChat(engine: SimEngine, http: IncomingMessage, body: unknown): PreparedChat {
  const req = parseRequest(ChatRequestSchema, body);
  const sglang = Boolean(req.return_prompt_token_ids || req.return_meta_info);
  if (req.stream && sglang) {
    throw badRequest("return_prompt_token_ids, return_token_ids and return_meta_info are only supported with stream=false", "stream");
  }
  if (req.top_logprobs && !req.logprobs) throw badRequest("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
  const text = renderPrompt(engine, req);
  const promptIds = engine.tok.encode(text);
  const explicit = req.max_completion_tokens ?? req.max_tokens ?? undefined;
  const limit = engine.checkContext(promptIds.length, explicit);
  engine.scheduler.countPrompt(promptIds.length);
  const ctx = readPrompt(text);
  const format = outputFormatOf(req);
  // A grammar-constrained answer has no <tool_call> blocks to parse.
  const toolMode = format ? "none" : toolModeOf(req);
  const identity = engine.identityFor(text, req.seed, requestIdentity(http, req as Record<string, unknown>));
  const policy = (http.headers["x-sim-policy"] as string | undefined) ?? req.policy ?? undefined;
  const choices: ChatChoice[] = [];
  for (let index = 0; index < (req.n ?? 1); index++) {
    const gen = engine.sample(ctx, {
      policy,
      model: req.model ?? undefined,
      seed: req.seed,
      identity,
      choice: index,
      maxTokens: explicit,
      limit,
      stop: stopList(req.stop),
      ignoreEos: Boolean(req.ignore_eos),
      toolMode,
      format,
    });
    const parsed = parseOutput(outputText(engine.tok, gen), toolMode);
    const toolIds = parsed.toolCalls.map(() => `chatcmpl-tool-${randomUUID().replace(/-/g, "")}`);
    const finishReason = gen.finish === "stop" && parsed.toolCalls.length && typeof toolMode !== "object" ? "tool_calls" : gen.finish;
    choices.push({ index, gen, parsed, toolIds, finishReason, toolMode });
  }
  return { req, promptIds, choices, sglang };
}

/** vLLM's template inputs: chat_template_kwargs, with reasoning_effort mapped onto enable_thinking. */
function renderPrompt(engine: SimEngine, req: ChatRequest): string {
  const kwargs: Record<string, unknown> = { ...(req.chat_template_kwargs ?? {}) };
  if (req.reasoning_effort != null && !("enable_thinking" in kwargs)) kwargs.enable_thinking = req.reasoning_effort !== "none";
  try {
    return engine.tok.renderChat(req.messages, {
      tools: req.tools ?? undefined,
      chatTemplateKwargs: kwargs,
      addGenerationPrompt: req.add_generation_prompt ?? true,
    });
  } catch (err) {
    throw badRequest(`the chat template could not render the messages: ${(err as Error).message}`, "messages");
  }
}

/** The request's tool mode; tool parsing needs tools in the request, as with vLLM's auto tool choice. */
function toolModeOf(req: ChatRequest): ToolMode {
  if (!req.tools?.length) return "none";
  const tc = req.tool_choice;
  if (tc == null || tc === "auto") return "auto";
  if (tc === "none" || tc === "required") return tc;
  const name = typeof tc === "object" ? (tc.function as { name?: unknown } | undefined)?.name : undefined;
  if (typeof name !== "string") throw badRequest(`unsupported tool_choice ${JSON.stringify(tc)}`, "tool_choice");
  if (!req.tools.some((t) => (t.function as { name?: unknown } | undefined)?.name === name)) {
    throw badRequest(`tool_choice names ${JSON.stringify(name)}, which is not in tools`, "tool_choice");
  }
  return { name };
}
