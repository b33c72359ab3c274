/**
 * Reading one CompletionRecord: the captured prompt ids, the sampled ids and
 * their logprobs, exactly as the engine returned them (reference §1).
 *
 * Sources, in order:
 * - prompt ids: the first non-empty list of `choices[0].input_token_ids`,
 *   `choices[0].prompt_token_ids`, `response.prompt_token_ids`;
 * - sampled ids: `choices[0].token_ids` (if the key exists), else `response.token_ids`;
 * - logprobs: `choices[0].logprobs.content[]` (vLLM/OpenAI) or
 *   `choices[0].meta_info.output_token_logprobs` (SGLang `[logprob, token_id, …]`
 *   or `{token_id, logprob | token_logprob}`).
 *
 * Logprobs are used only when they are aligned with the sampled ids: every
 * entry names a token id equal to the sampled id at its position (or, for
 * `logprobs.content`, no entry names an id and the count is equal: vLLM
 * returns one entry per sampled token). Anything else gives `logprobs: null`,
 * never a mix of sources. Without sampled ids, the first complete candidate
 * supplies both ids and logprobs.
 */
import type { CompletionRecord } from "../protocol/schemas.ts";

export type Dict = Record<string, unknown>;

export type LogprobSource = "logprobs.content" | "meta_info.output_token_logprobs";

/** One captured completion, read. Arrays are the record's own values, not copies. */
export interface Capture {
  /** Position in the session's arrival order. */
  readonly index: number;
  readonly id: string;
  readonly record: CompletionRecord;
  readonly prompt: readonly number[];
  readonly sampled: readonly number[];
  /** Aligned with `sampled`, or null when none are aligned. */
  readonly logprobs: readonly number[] | null;
  readonly logprobSource: LogprobSource | null;
  /** Why logprobs are null although sampled ids exist (unaligned, missing). */
  readonly logprobIssue: string | null;
  readonly finishReason: string | null;
  readonly choice: Dict;
  readonly request: Dict;
}

const isDict = (v: unknown): v is Dict => typeof v === "object" && v !== null && !Array.isArray(v);

/** The record's first choice, or `{}`. */
export function firstChoice(response: unknown): Dict {
  const choices = isDict(response) ? response.choices : undefined;
  return Array.isArray(choices) && isDict(choices[0]) ? choices[0] : {};
}

/** A list of integers, or undefined when `v` is not one (a bad item voids the list). */
export function intList(v: unknown): number[] | undefined {
  if (!Array.isArray(v)) return undefined;
  for (let i = 0; i < v.length; i++) {
    if (!Number.isInteger(v[i])) return intListCoerced(v);
  }
  return v as number[];
}

function intListCoerced(v: unknown[]): number[] | undefined {
  const out = new Array<number>(v.length);
  for (let i = 0; i < v.length; i++) {
    const n = typeof v[i] === "string" && /^-?\d+$/.test(v[i] as string) ? Number(v[i]) : v[i];
    if (!Number.isInteger(n)) return undefined;
    out[i] = n as number;
  }
  return out;
}

export function promptIds(record: CompletionRecord): number[] {
  const choice = firstChoice(record.response);
  for (const v of [choice.input_token_ids, choice.prompt_token_ids, record.response.prompt_token_ids]) {
    const ids = intList(v);
    if (ids && ids.length) return ids;
  }
  return [];
}

interface Candidate {
  ids: (number | undefined)[];
  logprobs: number[];
  source: LogprobSource;
}

const finite = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

function tokenIdOf(entry: Dict): number | undefined | null {
  if (entry.token_id != null) return Number.isInteger(entry.token_id) ? (entry.token_id as number) : null;
  // vLLM with `return_tokens_as_token_ids` names the id in the token string.
  const m = typeof entry.token === "string" ? /^token_id:(\d+)$/.exec(entry.token) : null;
  return m ? Number(m[1]) : undefined;
}

function fromContent(choice: Dict): Candidate | undefined {
  const lp = choice.logprobs;
  const content = isDict(lp) ? lp.content : undefined;
  if (!Array.isArray(content) || content.length === 0) return undefined;
  const ids: (number | undefined)[] = [];
  const logprobs: number[] = [];
  for (const e of content) {
    if (!isDict(e) || !finite(e.logprob)) return undefined;
    const id = tokenIdOf(e);
    if (id === null) return undefined;
    ids.push(id);
    logprobs.push(e.logprob);
  }
  return { ids, logprobs, source: "logprobs.content" };
}

function fromMetaInfo(choice: Dict): Candidate | undefined {
  const mi = choice.meta_info;
  const items = isDict(mi) ? mi.output_token_logprobs : undefined;
  if (!Array.isArray(items) || items.length === 0) return undefined;
  const ids: number[] = [];
  const logprobs: number[] = [];
  for (const it of items) {
    let id: unknown;
    let lp: unknown;
    if (Array.isArray(it) && it.length >= 2) [lp, id] = it;
    else if (isDict(it)) [id, lp] = [it.token_id, it.logprob ?? it.token_logprob];
    if (!Number.isInteger(id) || !finite(lp)) return undefined;
    ids.push(id as number);
    logprobs.push(lp);
  }
  return { ids, logprobs, source: "meta_info.output_token_logprobs" };
}

function aligned(c: Candidate, ids: readonly number[]): boolean {
  if (c.ids.length !== ids.length) return false;
  const named = c.ids.some((x) => x !== undefined);
  // Positional alignment is accepted only for a list that names no id at all.
  if (named && c.ids.some((x, i) => x !== ids[i])) return false;
  return true;
}

interface Sampled {
  sampled: number[];
  logprobs: number[] | null;
  source: LogprobSource | null;
  issue: string | null;
}

export function sampledIds(record: CompletionRecord): Sampled {
  const choice = firstChoice(record.response);
  const raw = "token_ids" in choice ? choice.token_ids : record.response.token_ids;
  const ids = raw == null ? undefined : intList(raw);
  const cands = [fromContent(choice), fromMetaInfo(choice)].filter((c): c is Candidate => c !== undefined);
  if (ids) {
    const hit = cands.find((c) => aligned(c, ids));
    if (hit) return { sampled: ids, logprobs: hit.logprobs, source: hit.source, issue: null };
    const issue = ids.length === 0 ? null : cands.length ? "logprobs not aligned with token_ids" : "no logprobs";
    return { sampled: ids, logprobs: null, source: null, issue };
  }
  const full = cands.find((c) => c.ids.every((x) => x !== undefined));
  if (full) return { sampled: full.ids as number[], logprobs: full.logprobs, source: full.source, issue: null };
  return { sampled: [], logprobs: null, source: null, issue: null };
}

/** Reads one record (see the module comment). */
export function extract(record: CompletionRecord, index: number): Capture {
  const choice = firstChoice(record.response);
  const s = sampledIds(record);
  const fr = choice.finish_reason;
  return {
    index,
    id: record.completion_id,
    record,
    prompt: promptIds(record),
    sampled: s.sampled,
    logprobs: s.logprobs,
    logprobSource: s.source,
    logprobIssue: s.issue,
    finishReason: fr == null ? null : String(fr),
    choice,
    request: isDict(record.request) ? record.request : {},
  };
}

/** Deep copies of the dict items of `request.messages`, from the `start`-th one. */
export function promptMessages(c: Capture, start = 0): Dict[] {
  const m = c.request.messages;
  return Array.isArray(m) ? m.filter(isDict).slice(start).map((x) => structuredClone(x)) : [];
}

export function promptMessageCount(c: Capture): number {
  const m = c.request.messages;
  return Array.isArray(m) ? m.filter(isDict).length : 0;
}

/** `[choices[0].message]` (deep copy) or `[]`. */
export function responseMessages(c: Capture): Dict[] {
  return isDict(c.choice.message) ? [structuredClone(c.choice.message)] : [];
}

/** Dict items of `request.tools` (deep copies), or null when none. */
export function requestTools(c: Capture): Dict[] | null {
  const t = c.request.tools;
  if (!Array.isArray(t)) return null;
  const out = t.filter(isDict).map((x) => structuredClone(x));
  return out.length ? out : null;
}
