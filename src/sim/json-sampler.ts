/**
 * A seeded generator of JSON values valid against a JSON schema, standing in
 * for vLLM's schema-constrained decoding. It covers what structured-output
 * callers send: objects (every declared property, plus required names that
 * have no declaration), strings (minLength/maxLength, a few formats),
 * integers and numbers within minimum/maximum (exclusive bounds, multipleOf),
 * enums and consts, booleans, null, arrays (items, prefixItems,
 * minItems/maxItems), type lists, anyOf/oneOf, allOf of objects, and local
 * `$ref`s (`#/$defs/…`, `#/definitions/…`). Every draw adds its ln(p) to the
 * value's log-probability, so the answer's logprobs stay consistent with how
 * it was sampled.
 */
import type { JsonSchema } from "./structured-format.ts";

const WORDS = [
  "the", "task", "is", "a", "simple", "single", "step", "command", "with", "clear", "output", "file",
  "request", "needs", "one", "shell", "call", "and", "no", "risk", "direct", "read", "write", "check",
];
/** Past this nesting depth, optional properties are left out and arrays take their minimum length. */
const MAX_DEPTH = 8;

export interface SampledJson {
  value: unknown;
  logprob: number;
}

export function sampleJson(schema: JsonSchema, rand: () => number): SampledJson {
  const s = new JsonSampler(schema, rand);
  const value = s.value(schema, 0);
  return { value, logprob: s.logprob };
}

/** A small object, as a `json_object` answer. */
export function sampleJsonObject(rand: () => number): SampledJson {
  return sampleJson({ type: "object", properties: { answer: { type: "string", maxLength: 48 } }, required: ["answer"] }, rand);
}

class JsonSampler {
  logprob = 0;
  constructor(
    private readonly root: JsonSchema,
    private readonly rand: () => number,
  ) {}

  /** A uniform index in [0, n), counted into the log-probability. */
  private pick(n: number): number {
    this.logprob -= Math.log(n);
    return Math.min(n - 1, Math.floor(this.rand() * n));
  }

  value(schema: unknown, depth: number): unknown {
    if (depth > 4 * MAX_DEPTH) return null; // only a schema that requires itself forever gets here
    if (schema === true || schema === undefined) return this.string({});
    if (schema === false || typeof schema !== "object" || schema === null) return null;
    const s = this.resolve(schema as JsonSchema);
    if ("const" in s) return s.const;
    if (Array.isArray(s.enum) && s.enum.length) return s.enum[this.pick(s.enum.length)];
    const alts = (s.anyOf ?? s.oneOf) as unknown[] | undefined;
    if (Array.isArray(alts) && alts.length) return this.value({ ...without(s, "anyOf", "oneOf"), ...(this.resolve(alts[this.pick(alts.length)] as JsonSchema)) }, depth);
    if (Array.isArray(s.allOf) && s.allOf.length) return this.value(mergeAll(without(s, "allOf"), s.allOf.map((x) => this.resolve(x as JsonSchema))), depth);
    switch (this.typeOf(s)) {
      case "object":
        return this.object(s, depth);
      case "array":
        return this.array(s, depth);
      case "integer":
        return this.integer(s);
      case "number":
        return this.number(s);
      case "boolean":
        return this.pick(2) === 1;
      case "null":
        return null;
      default:
        return this.string(s);
    }
  }

  private resolve(s: JsonSchema): JsonSchema {
    let cur = s;
    for (let hops = 0; typeof cur.$ref === "string" && hops < 32; hops++) {
      const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(cur.$ref as string);
      const defs = m ? (this.root[m[1]] as Record<string, JsonSchema> | undefined) : undefined;
      const target = m && defs ? defs[decodeURIComponent(m[2]).replace(/~1/g, "/").replace(/~0/g, "~")] : undefined;
      if (!target) return { ...without(cur, "$ref") };
      cur = { ...without(cur, "$ref"), ...target };
    }
    return cur;
  }

  private typeOf(s: JsonSchema): string {
    const t = s.type;
    if (Array.isArray(t) && t.length) {
      const nonNull = t.filter((x) => x !== "null");
      return String((nonNull.length ? nonNull : t)[nonNull.length > 1 ? this.pick(nonNull.length) : 0]);
    }
    if (typeof t === "string") return t;
    if (s.properties || s.required || s.additionalProperties !== undefined) return "object";
    if (s.items || s.prefixItems) return "array";
    if (s.minimum !== undefined || s.maximum !== undefined) return "number";
    return "string";
  }

  private object(s: JsonSchema, depth: number): Record<string, unknown> {
    const props = (s.properties ?? {}) as Record<string, unknown>;
    const required = Array.isArray(s.required) ? (s.required as string[]) : [];
    const out: Record<string, unknown> = {};
    for (const [k, p] of Object.entries(props)) {
      if (depth < MAX_DEPTH || required.includes(k)) out[k] = this.value(p, depth + 1);
    }
    for (const k of required) if (!(k in out)) out[k] = this.value(additional(s), depth + 1);
    if (!Object.keys(out).length && s.additionalProperties !== false && depth === 0) out.answer = this.string({ maxLength: 48 });
    return out;
  }

  private array(s: JsonSchema, depth: number): unknown[] {
    const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : [];
    const min = Math.max(num(s.minItems) ?? 0, prefix.length && s.items === false ? prefix.length : 0);
    const max = s.items === false ? prefix.length : (num(s.maxItems) ?? Math.max(min, 3));
    const n = depth >= MAX_DEPTH ? min : min + this.pick(Math.min(max, min + 3) - min + 1);
    return Array.from({ length: n }, (_, i) => this.value(i < prefix.length ? prefix[i] : (s.items ?? {}), depth + 1));
  }

  private integer(s: JsonSchema): number {
    const step = Number.isInteger(num(s.multipleOf)) && num(s.multipleOf)! > 0 ? num(s.multipleOf)! : 1;
    const lo = Math.ceil(lowBound(s, 1) / step);
    const hi = Math.floor(highBound(s, 1) / step);
    if (hi < lo) return lo * step;
    return (lo + this.pick(Math.min(hi - lo + 1, 1_000_000))) * step;
  }

  private number(s: JsonSchema): number {
    if (num(s.multipleOf) !== undefined) return this.integer(s);
    const lo = lowBound(s, 0.01);
    const hi = highBound(s, 0.01);
    const cents = Math.max(0, Math.floor((hi - lo) * 100));
    return Math.min(hi, Math.round((lo + this.pick(cents + 1) / 100) * 100) / 100);
  }

  /** A version-4 UUID (version nibble 4, variant 8..b). */
  private uuid(): string {
    const hex = Array.from({ length: 32 }, (_, i) => (i === 12 ? "4" : i === 16 ? "89ab"[this.pick(4)] : this.pick(16).toString(16)));
    const h = hex.join("");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  private string(s: JsonSchema): string {
    const format = typeof s.format === "string" ? s.format : "";
    if (format === "date-time" || format === "date" || format === "time") {
      const iso = new Date((1_700_000_000 + this.pick(100_000_000)) * 1000).toISOString();
      return format === "date" ? iso.slice(0, 10) : format === "time" ? `${iso.slice(11, 19)}Z` : `${iso.slice(0, 19)}Z`;
    }
    if (format === "email") return `${WORDS[this.pick(WORDS.length)]}@example.com`;
    if (format === "uri" || format === "url") return `https://example.com/${WORDS[this.pick(WORDS.length)]}`;
    if (format === "uuid") return this.uuid();
    const min = num(s.minLength) ?? 0;
    const max = num(s.maxLength) ?? Infinity;
    const words = Array.from({ length: 2 + this.pick(7) }, () => WORDS[this.pick(WORDS.length)]);
    let text = words.join(" ");
    while ([...text].length < min) text += ` ${WORDS[this.pick(WORDS.length)]}`;
    const chars = [...text];
    return chars.length > max ? chars.slice(0, max).join("") : text;
  }
}

function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

/**
 * The smallest allowed value (`unit` is the step past an exclusive bound).
 * Unbounded values default to the range [1, 100], the small positive numbers
 * a model writes for scores and counts (schemas often give a range only in prose).
 */
function lowBound(s: JsonSchema, unit: number): number {
  const m = num(s.minimum);
  const ex = num(s.exclusiveMinimum);
  const bounds = [m, ex !== undefined ? ex + unit : undefined, s.exclusiveMinimum === true && m !== undefined ? m + unit : undefined];
  const set = bounds.filter((x): x is number => x !== undefined);
  if (set.length) return Math.max(...set);
  const hi = rawHigh(s, unit);
  return hi === undefined ? 1 : Math.min(1, hi - 99);
}

function highBound(s: JsonSchema, unit: number): number {
  return rawHigh(s, unit) ?? lowBound(s, unit) + 99;
}

function rawHigh(s: JsonSchema, unit: number): number | undefined {
  const m = num(s.maximum);
  const ex = num(s.exclusiveMaximum);
  const bounds = [m, ex !== undefined ? ex - unit : undefined, s.exclusiveMaximum === true && m !== undefined ? m - unit : undefined];
  const set = bounds.filter((x): x is number => x !== undefined);
  return set.length ? Math.min(...set) : undefined;
}

function additional(s: JsonSchema): unknown {
  return typeof s.additionalProperties === "object" ? s.additionalProperties : { type: "string", maxLength: 24 };
}

function without(s: JsonSchema, ...keys: string[]): JsonSchema {
  const out = { ...s };
  for (const k of keys) delete out[k];
  return out;
}

/** allOf of object schemas: properties merged, required lists joined; other keywords from the last wins. */
function mergeAll(base: JsonSchema, parts: JsonSchema[]): JsonSchema {
  let out: JsonSchema = { ...base };
  for (const p of parts) {
    const props = { ...((out.properties ?? {}) as object), ...((p.properties ?? {}) as object) };
    const required = [...new Set([...((out.required as string[]) ?? []), ...((p.required as string[]) ?? [])])];
    out = { ...out, ...p, properties: props, required };
  }
  return out;
}
