/**
 * POST /v1/completions (vLLM): a text or token-id prompt, no chat template.
 * With `return_token_ids`, `prompt_token_ids` and `token_ids` are per choice
 * (unlike chat). `logprobs: k` gives the legacy {tokens, token_logprobs,
 * top_logprobs, text_offset} form.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import { requestIdentity, type SimEngine } from "../engine.ts";
import { outputText, type Generation } from "../generation.ts";
import { badRequest, sendJson, startSse } from "../http.ts";
import { readPrompt } from "../prompt-context.ts";
import { DeltaTracker } from "../stream-deltas.ts";
import { outputFormatOf } from "../structured-format.ts";
import { CompletionRequestSchema, parseRequest, stopList, type CompletionRequest } from "./request-fields.ts";

export async function handleCompletions(engine: SimEngine, http: IncomingMessage, res: ServerResponse, body: unknown, signal: AbortSignal) {
  const req = parseRequest(CompletionRequestSchema, body);
  const { promptIds, promptText } = promptOf(engine, req.prompt);
  const explicit = req.max_tokens ?? 16; // vLLM's completions default
  const limit = engine.checkContext(promptIds.length, explicit, "prompt");
  engine.scheduler.countPrompt(promptIds.length);
  const ctx = readPrompt(promptText);
  const identity = engine.identityFor(promptText, req.seed, requestIdentity(http, req as Record<string, unknown>));
  const policy = (http.headers["x-sim-policy"] as string | undefined) ?? req.policy ?? undefined;
  const format = outputFormatOf(req);
  const gens = Array.from({ length: req.n ?? 1 }, (_, choice) =>
    engine.sample(ctx, { policy, model: req.model ?? undefined, seed: req.seed, identity, choice, maxTokens: explicit, limit, stop: stopList(req.stop), ignoreEos: Boolean(req.ignore_eos), format }),
  );
  const meta = { id: `cmpl-${randomUUID().replace(/-/g, "")}`, object: "text_completion", created: Math.floor(Date.now() / 1000), model: req.model ?? engine.opts.modelName };
  const version = engine.policyVersion;
  if (req.stream) return streamCompletions(engine, res, req, gens, promptIds, meta, signal);
  await Promise.all(gens.map((g) => engine.run(g, signal, () => {}, promptIds.length)));
  const completion = gens.reduce((a, g) => a + g.ids.length, 0);
  sendJson(
    res,
    200,
    {
      ...meta,
      choices: gens.map((g, index) => ({
        index,
        text: (req.echo ? promptText : "") + outputText(engine.tok, g),
        logprobs: req.logprobs != null ? legacyLogprobs(engine, g, req) : null,
        finish_reason: g.finish,
        stop_reason: g.stopReason,
        prompt_logprobs: null,
        prompt_token_ids: req.return_token_ids ? promptIds : null,
        token_ids: req.return_token_ids ? g.ids : null,
      })),
      service_tier: null,
      system_fingerprint: null,
      usage: { prompt_tokens: promptIds.length, total_tokens: promptIds.length + completion, completion_tokens: completion, prompt_tokens_details: null },
      kv_transfer_params: null,
      policy_version: version,
    },
    { "x-policy-version": version },
  );
}

export function promptOf(engine: SimEngine, prompt: CompletionRequest["prompt"]): { promptIds: number[]; promptText: string } {
  if (typeof prompt === "string") return { promptIds: engine.tok.encode(prompt), promptText: prompt };
  if (typeof prompt[0] === "string") return promptOf(engine, prompt[0] as string);
  const ids = prompt as number[];
  const bad = ids.find((id) => id >= engine.tok.vocabSize);
  if (bad !== undefined) throw badRequest(`token id ${bad} is out of vocabulary`, "prompt");
  return { promptIds: ids, promptText: engine.tok.decode(ids) };
}

function legacyLogprobs(engine: SimEngine, g: Generation, req: CompletionRequest) {
  const asIds = Boolean(req.return_tokens_as_token_ids);
  const k = req.logprobs ?? 0;
  const tokens: string[] = [];
  const tokenLogprobs: number[] = [];
  const top: Array<Record<string, number> | null> = [];
  const offsets: number[] = [];
  let offset = 0;
  g.ids.forEach((id, i) => {
    const e = engine.logprobs.entry(id, g.logprobs[i], k + 1, asIds, i);
    tokens.push(e.token);
    tokenLogprobs.push(e.logprob);
    top.push(k > 0 ? Object.fromEntries(e.top_logprobs.map((t) => [t.token, t.logprob])) : null);
    offsets.push(offset);
    offset += engine.tok.tokenText(id).length;
  });
  return { text_offset: offsets, token_logprobs: tokenLogprobs, tokens, top_logprobs: top };
}

async function streamCompletions(
  engine: SimEngine,
  res: ServerResponse,
  req: CompletionRequest,
  gens: Generation[],
  promptIds: number[],
  meta: Record<string, unknown>,
  signal: AbortSignal,
) {
  const version = engine.policyVersion;
  const sse = startSse(res, { "x-policy-version": version });
  await Promise.all(
    gens.map((g, index) => {
      const tracker = new DeltaTracker(engine.tok, g, { reasoning: null, content: "", toolCalls: [] }, []);
      return engine.run(g, signal, (i) => {
        const last = i === g.ids.length - 1;
        const choice: Record<string, unknown> = {
          index,
          text: tracker.next(i, g.ids[i], last).content ?? "",
          logprobs: req.logprobs != null ? legacyLogprobs(engine, { ...g, ids: [g.ids[i]], logprobs: [g.logprobs[i]] }, req) : null,
          finish_reason: last ? g.finish : null,
          stop_reason: last ? g.stopReason : null,
        };
        if (req.return_token_ids) {
          choice.token_ids = [g.ids[i]];
          if (i === 0) choice.prompt_token_ids = promptIds;
        }
        sse.write({ ...meta, choices: [choice], policy_version: version });
      }, promptIds.length);
    }),
  );
  if (req.stream_options?.include_usage) {
    const completion = gens.reduce((a, g) => a + g.ids.length, 0);
    sse.write({ ...meta, choices: [], usage: { prompt_tokens: promptIds.length, total_tokens: promptIds.length + completion, completion_tokens: completion } });
  }
  sse.end();
}
