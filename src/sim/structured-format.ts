/**
 * Structured-output requests, read the way vLLM reads them: the OpenAI
 * `response_format` (`json_schema` with `json_schema.schema`, `json_object`,
 * `text`), vLLM's `structured_outputs` (`json`, `json_object`, `choice`) and
 * its older `guided_json` / `guided_choice`. Constraints the sim cannot
 * honour (regex, grammar, structural tags) are a 400 naming the field rather
 * than an unconstrained answer.
 */
import { badRequest } from "./http.ts";
import { sampleJson, sampleJsonObject } from "./json-sampler.ts";
import { pyJson } from "./qwen3-output.ts";
import type { PolicyOutput, StructuredOutput } from "./policy/types.ts";

export type JsonSchema = Record<string, unknown>;

/** What the answer text must be: JSON valid against a schema, any JSON object, or one of fixed strings. */
export type OutputFormat =
  | { kind: "json_schema"; schema: JsonSchema }
  | { kind: "json_object" }
  | { kind: "choice"; choices: string[] };

export interface FormatFields {
  response_format?: unknown;
  structured_outputs?: unknown;
  guided_json?: unknown;
  guided_choice?: unknown;
}

/** The request's output constraint, or undefined for free text. */
export function outputFormatOf(req: FormatFields): OutputFormat | undefined {
  return fromResponseFormat(req.response_format) ?? fromStructuredOutputs(req.structured_outputs) ?? fromGuided(req);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function fromResponseFormat(rf: unknown): OutputFormat | undefined {
  if (rf == null) return undefined;
  if (!isObject(rf)) throw badRequest("response_format must be an object", "response_format");
  if (rf.type === "text") return undefined;
  if (rf.type === "json_object") return { kind: "json_object" };
  if (rf.type === "json_schema") {
    const js = rf.json_schema;
    const schema = isObject(js) ? (js.schema ?? js.json_schema) : undefined;
    if (!isObject(schema)) throw badRequest("response_format.json_schema.schema must be a JSON schema object", "response_format.json_schema.schema");
    return { kind: "json_schema", schema };
  }
  if (rf.type === "structural_tag") throw badRequest("response_format type structural_tag is not supported by the sim", "response_format.type");
  throw badRequest(`response_format.type must be text, json_object or json_schema, not ${JSON.stringify(rf.type)}`, "response_format.type");
}

function fromStructuredOutputs(so: unknown): OutputFormat | undefined {
  if (so == null) return undefined;
  if (!isObject(so)) throw badRequest("structured_outputs must be an object", "structured_outputs");
  for (const k of ["regex", "grammar", "structural_tag"]) {
    if (so[k] != null) throw badRequest(`structured_outputs.${k} is not supported by the sim`, `structured_outputs.${k}`);
  }
  if (so.json != null) return { kind: "json_schema", schema: schemaValue(so.json, "structured_outputs.json") };
  if (so.json_object === true) return { kind: "json_object" };
  if (so.choice != null) return { kind: "choice", choices: choiceList(so.choice, "structured_outputs.choice") };
  return undefined;
}

function fromGuided(req: FormatFields): OutputFormat | undefined {
  if (req.guided_json != null) return { kind: "json_schema", schema: schemaValue(req.guided_json, "guided_json") };
  if (req.guided_choice != null) return { kind: "choice", choices: choiceList(req.guided_choice, "guided_choice") };
  return undefined;
}

/** vLLM takes a schema as an object or as JSON text. */
function schemaValue(v: unknown, field: string): JsonSchema {
  let s = v;
  if (typeof v === "string") {
    try {
      s = JSON.parse(v);
    } catch {
      throw badRequest(`${field} is not valid JSON`, field);
    }
  }
  if (!isObject(s)) throw badRequest(`${field} must be a JSON schema object`, field);
  return s;
}

function choiceList(v: unknown, field: string): string[] {
  if (!Array.isArray(v) || !v.length || !v.every((x) => typeof x === "string")) throw badRequest(`${field} must be a non-empty list of strings`, field);
  return v as string[];
}

/**
 * The policy's answer under an output constraint: its reasoning is kept (a
 * token-level policy has none), the text becomes a seeded value of the
 * required form (JSON written with Python `json.dumps` spacing, or a choice
 * string), and there are no tool calls: a grammar-constrained answer cannot
 * contain a <tool_call> block. The log-probability adds the draws' ln(p).
 */
export function constrainOutput(out: PolicyOutput, format: OutputFormat, rand: () => number): StructuredOutput {
  const think = out.kind === "structured" ? out.think : undefined;
  const base = out.kind === "structured" ? out.logprob : 0;
  if (format.kind === "choice") {
    const i = Math.min(format.choices.length - 1, Math.floor(rand() * format.choices.length));
    return { kind: "structured", think, content: format.choices[i], toolCalls: [], logprob: base - Math.log(format.choices.length) };
  }
  const json = format.kind === "json_object" ? sampleJsonObject(rand) : sampleJson(format.schema, rand);
  return { kind: "structured", think, content: pyJson(json.value), toolCalls: [], logprob: base + json.logprob };
}
