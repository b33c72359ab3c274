/**
 * SGLang's native POST /generate: `text` or `input_ids`, nested
 * `sampling_params`, and with `return_logprob` the
 * `meta_info.output_token_logprobs` triples [logprob, token_id, text|null]
 * that slime and AReaL read. `finish_reason` is SGLang's object form.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { requestIdentity, type SimEngine } from "../engine.ts";
import { outputText, type Generation } from "../generation.ts";
import { badRequest, sendJson, startSse } from "../http.ts";
import { MAX_LOGPROBS } from "../logprobs.ts";
import { readPrompt } from "../prompt-context.ts";
import { outputFormatOf, type OutputFormat } from "../structured-format.ts";
import { parseRequest, stopList } from "./request-fields.ts";
import { promptOf } from "./completions.ts";

const GenerateSchema = z.looseObject({
  text: z.union([z.string(), z.array(z.string())]).nullish(),
  input_ids: z.union([z.array(z.number().int().min(0)), z.array(z.array(z.number().int().min(0)))]).nullish(),
  sampling_params: z
    .looseObject({
      max_new_tokens: z.number().int().min(0).nullish(),
      stop: z.union([z.string(), z.array(z.string())]).nullish(),
      ignore_eos: z.boolean().nullish(),
      temperature: z.number().min(0).nullish(),
      seed: z.number().int().nullish(),
    })
    .nullish(),
  return_logprob: z.boolean().nullish(),
  top_logprobs_num: z.number().int().min(0).max(MAX_LOGPROBS).nullish(),
  return_text_in_logprobs: z.boolean().nullish(),
  return_prompt_token_ids: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  rid: z.string().nullish(),
  policy: z.string().nullish(),
  session_id: z.string().nullish(),
});

type GenerateRequest = z.infer<typeof GenerateSchema>;

export async function handleGenerate(engine: SimEngine, http: IncomingMessage, res: ServerResponse, body: unknown, signal: AbortSignal) {
  const req = parseRequest(GenerateSchema, body);
  const prompt = singlePrompt(req);
  const { promptIds, promptText } = promptOf(engine, prompt);
  const sp = req.sampling_params ?? {};
  const explicit = sp.max_new_tokens ?? 128; // SGLang's default
  const limit = engine.checkContext(promptIds.length, explicit, "prompt");
  engine.scheduler.countPrompt(promptIds.length);
  const started = performance.now();
  const gen =
    explicit === 0
      ? { ids: [], logprobs: [], finish: "length" as const, stopReason: null }
      : engine.sample(readPrompt(promptText), {
          policy: (http.headers["x-sim-policy"] as string | undefined) ?? req.policy ?? undefined,
          seed: sp.seed,
          identity: engine.identityFor(promptText, sp.seed, requestIdentity(http, req as Record<string, unknown>)),
          choice: 0,
          maxTokens: explicit,
          limit,
          stop: stopList(sp.stop),
          ignoreEos: Boolean(sp.ignore_eos),
          format: sglangFormat(sp),
        });
  const rid = req.rid ?? randomUUID().replace(/-/g, "");
  const answer = (upTo: number) => generateBody(engine, req, gen, upTo, promptIds, rid, (performance.now() - started) / 1000);
  if (req.stream) {
    const sse = startSse(res, { "x-policy-version": engine.policyVersion });
    await engine.run(gen, signal, (i) => sse.write(answer(i + 1)), promptIds.length);
    return sse.end();
  }
  await engine.run(gen, signal, () => {}, promptIds.length);
  sendJson(res, 200, answer(gen.ids.length), { "x-policy-version": engine.policyVersion });
}

function singlePrompt(req: GenerateRequest): string | number[] {
  if (req.input_ids != null) {
    if (Array.isArray(req.input_ids[0])) throw badRequest("batched input_ids are not supported by the simulator; send one request per prompt", "input_ids");
    if (!req.input_ids.length) throw badRequest("input_ids is empty", "input_ids");
    return req.input_ids as number[];
  }
  if (typeof req.text === "string") return req.text;
  if (Array.isArray(req.text)) throw badRequest("batched text is not supported by the simulator; send one request per prompt", "text");
  throw badRequest("either text or input_ids is required", "text");
}

function generateBody(engine: SimEngine, req: GenerateRequest, full: Generation, upTo: number, promptIds: number[], rid: string, latency: number) {
  const done = upTo === full.ids.length;
  const gen: Generation = { ...full, ids: full.ids.slice(0, upTo), logprobs: full.logprobs.slice(0, upTo) };
  const finish = !done ? null : gen.finish === "length" ? { type: "length", length: gen.ids.length } : { type: "stop", matched: gen.stopReason ?? engine.tok.eotTokenId };
  const meta: Record<string, unknown> = {
    id: rid,
    finish_reason: finish,
    prompt_tokens: promptIds.length,
    completion_tokens: gen.ids.length,
    cached_tokens: 0,
    weight_version: engine.policyVersion,
    e2e_latency: latency,
  };
  if (req.return_logprob) {
    const withText = Boolean(req.return_text_in_logprobs);
    const top = req.top_logprobs_num ?? 0;
    const triple = (lp: number, id: number) => [lp, id, withText ? engine.tok.tokenText(id) : null];
    meta.input_token_logprobs = [];
    meta.output_token_logprobs = gen.ids.map((id, i) => triple(gen.logprobs[i], id));
    if (top > 0) {
      meta.output_top_logprobs = gen.ids.map((id, i) =>
        engine.logprobs.entry(id, gen.logprobs[i], top, true, i).top_logprobs.map((t) => triple(t.logprob, Number(t.token.slice(9)))),
      );
    }
  }
  const out: Record<string, unknown> = { text: outputText(engine.tok, gen), output_ids: gen.ids, meta_info: meta };
  if (req.return_prompt_token_ids) out.prompt_token_ids = promptIds;
  return out;
}

/** SGLang's `sampling_params.json_schema` (JSON text); regex and EBNF constraints are refused. */
function sglangFormat(sp: Record<string, unknown>): OutputFormat | undefined {
  for (const k of ["regex", "ebnf", "structural_tag"]) {
    if (sp[k] != null) throw badRequest(`sampling_params.${k} is not supported by the sim`, `sampling_params.${k}`);
  }
  if (sp.json_schema == null) return undefined;
  try {
    return outputFormatOf({ guided_json: sp.json_schema });
  } catch {
    throw badRequest("sampling_params.json_schema must be a JSON schema (JSON text)", "sampling_params.json_schema");
  }
}
