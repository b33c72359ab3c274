/**
 * vLLM's POST /tokenize (a text prompt or chat messages) and POST /detokenize.
 */
import type { ServerResponse } from "node:http";
import { z } from "zod";
import type { SimEngine } from "../engine.ts";
import { badRequest, sendJson } from "../http.ts";
import { parseRequest } from "./request-fields.ts";

const TokenizeSchema = z.looseObject({
  prompt: z.string().nullish(),
  messages: z.array(z.looseObject({ role: z.string() })).nullish(),
  tools: z.array(z.looseObject({})).nullish(),
  add_generation_prompt: z.boolean().nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  return_token_strs: z.boolean().nullish(),
});

const DetokenizeSchema = z.looseObject({ tokens: z.array(z.number().int().min(0)) });

export function handleTokenize(engine: SimEngine, res: ServerResponse, body: unknown): void {
  const req = parseRequest(TokenizeSchema, body);
  let tokens: number[];
  if (req.messages) {
    try {
      tokens = engine.tok.tokenizeChat(req.messages, {
        tools: req.tools ?? undefined,
        addGenerationPrompt: req.add_generation_prompt ?? true,
        chatTemplateKwargs: req.chat_template_kwargs ?? undefined,
      });
    } catch (err) {
      throw badRequest(`the chat template could not render the messages: ${(err as Error).message}`, "messages");
    }
  } else if (typeof req.prompt === "string") {
    tokens = engine.tok.encode(req.prompt);
  } else {
    throw badRequest("either prompt or messages is required", "prompt");
  }
  const out: Record<string, unknown> = { count: tokens.length, max_model_len: engine.opts.maxModelLen, tokens };
  if (req.return_token_strs) out.token_strs = tokens.map((id) => engine.tok.idToToken(id) ?? null);
  sendJson(res, 200, out);
}

export function handleDetokenize(engine: SimEngine, res: ServerResponse, body: unknown): void {
  const req = parseRequest(DetokenizeSchema, body);
  const bad = req.tokens.findIndex((id) => id >= engine.tok.vocabSize);
  if (bad >= 0) throw badRequest(`token id ${req.tokens[bad]} is out of vocabulary`, "tokens");
  sendJson(res, 200, { prompt: engine.tok.decode(req.tokens) });
}
