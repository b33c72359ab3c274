/**
 * Proving one trace against the captured completions: its response is read
 * as [sampled ids of member 1] then, for each later member, [a mask-0 run
 * that is a suffix of the member's own captured prompt, taken from the part
 * beyond the previous member's prompt] [the member's sampled ids, mask 1,
 * with their captured logprobs]. Consecutive members' prompts must extend one
 * another, and the trace's prompt must be the first member's captured prompt.
 * Members come from `metadata.completion_ids` when present, else are searched.
 */
import type { Trace } from "../protocol/schemas.ts";
import type { Capture } from "./extract.ts";
import { checkpointHashes, isPrefix, prefixHash, sliceEquals } from "./prefix-hash.ts";

export class TraceError extends Error {}

export interface CaptureIndex {
  byId: Map<string, Capture>;
  all: readonly Capture[];
  /** Captures by the hash of their whole prompt. */
  byPrompt: Map<number, Capture[]>;
  /** Hash of `c.prompt[0..n)`. */
  hashAt(c: Capture, n: number): number;
}

export function indexCaptures(all: readonly Capture[]): CaptureIndex {
  const cache = new Map<Capture, Uint32Array>();
  const hashAt = (c: Capture, n: number) => {
    let h = cache.get(c);
    if (!h) cache.set(c, (h = checkpointHashes(c.prompt)));
    return prefixHash(c.prompt, h, n);
  };
  const byPrompt = new Map<number, Capture[]>();
  const byId = new Map<string, Capture>();
  for (const c of all) {
    const k = hashAt(c, c.prompt.length);
    byPrompt.set(k, [...(byPrompt.get(k) ?? []), c]);
    if (byId.has(c.id)) throw new TraceError(`completion id ${c.id} occurs twice in the session`);
    byId.set(c.id, c);
  }
  return { byId, all, byPrompt, hashAt };
}

export interface TraceProof {
  members: Capture[];
  mask0: number;
  mask1: number;
}

interface Cursor {
  t: Trace;
  pos: number;
}

export function proveTrace(t: Trace, idx: CaptureIndex): TraceProof {
  checkShape(t);
  const hinted = hintedMembers(t, idx);
  const cur: Cursor = { t, pos: 0 };
  const first = hinted ? hinted[0] : searchFirst(t, idx);
  if (!sliceEquals(t.prompt_ids, 0, first.prompt, 0, first.prompt.length) || t.prompt_ids.length !== first.prompt.length) {
    throw new TraceError(`prompt_ids are not the captured prompt of ${first.id}`);
  }
  takeSampled(cur, first);
  const members = [first];
  while (cur.pos < t.response_ids.length || (hinted && members.length < hinted.length)) {
    const prev = members[members.length - 1];
    const run = mask0Run(cur);
    if (hinted) {
      const group = [];
      for (let i = members.length; i < hinted.length; i++) {
        group.push(hinted[i]);
        if (hinted[i].sampled.length > 0) break;
      }
      if (group.length === 0) throw new TraceError(`response position ${cur.pos}: tokens left after the last listed completion`);
      if (!decompose(t.response_ids, cur.pos, run, prev, group)) {
        throw new TraceError(`response positions ${cur.pos}..${cur.pos + run}: mask-0 tokens are not interstitials of ${group.map((g) => g.id).join(", ")}`);
      }
      cur.pos += run;
      for (const g of group) takeSampled(cur, g);
      members.push(...group);
    } else {
      const next = searchNext(cur, run, prev, idx, members);
      cur.pos += run;
      takeSampled(cur, next);
      members.push(next);
    }
  }
  const mask1 = t.loss_mask.reduce<number>((n, m) => n + m, 0);
  return { members, mask1, mask0: t.response_ids.length - mask1 };
}

function checkShape(t: Trace): void {
  if (t.loss_mask.length !== t.response_ids.length) throw new TraceError("loss_mask and response_ids differ in length");
  if (t.response_logprobs && t.response_logprobs.length !== t.response_ids.length) {
    throw new TraceError("response_logprobs and response_ids differ in length");
  }
  const bad = t.loss_mask.findIndex((m) => m !== 0 && m !== 1);
  if (bad >= 0) throw new TraceError(`loss_mask[${bad}] is not 0 or 1`);
}

function hintedMembers(t: Trace, idx: CaptureIndex): Capture[] | undefined {
  const ids = t.metadata.completion_ids;
  if (!Array.isArray(ids) || ids.length === 0) return undefined;
  const out = ids.map((id) => {
    const c = typeof id === "string" ? idx.byId.get(id) : undefined;
    if (!c) throw new TraceError(`metadata.completion_ids names ${JSON.stringify(id)}, which is not in the session`);
    return c;
  });
  for (let i = 1; i < out.length; i++) {
    if (out[i].index <= out[i - 1].index) throw new TraceError(`completion ${out[i].id} is listed after ${out[i - 1].id} but arrived before it`);
  }
  return out;
}

/** Length of the mask-0 run at the cursor; its logprobs, if any, must be exactly 0. */
function mask0Run(cur: Cursor): number {
  const { t, pos } = cur;
  let q = pos;
  while (q < t.response_ids.length && t.loss_mask[q] === 0) {
    if (t.response_logprobs && t.response_logprobs[q] !== 0) throw new TraceError(`response position ${q}: mask-0 token has logprob ${t.response_logprobs[q]}, not 0`);
    q++;
  }
  return q - pos;
}

/** Checks that the member's sampled ids come next, all mask 1, with their captured logprobs. */
function takeSampled(cur: Cursor, c: Capture): void {
  const { t, pos } = cur;
  const lps = t.response_logprobs;
  if (lps && c.sampled.length && !c.logprobs) throw new TraceError(`trace has logprobs but completion ${c.id} has none aligned`);
  for (let i = 0; i < c.sampled.length; i++) {
    const p = pos + i;
    if (p >= t.response_ids.length) throw new TraceError(`response ends inside the sampled ids of ${c.id}`);
    if (t.response_ids[p] !== c.sampled[i]) throw new TraceError(`response position ${p}: token ${t.response_ids[p]} is not ${c.id}'s sampled token ${c.sampled[i]} (#${i})`);
    if (t.loss_mask[p] !== 1) throw new TraceError(`response position ${p}: ${c.id}'s sampled token #${i} has mask 0`);
    if (lps && lps[p] !== c.logprobs![i]) throw new TraceError(`response position ${p}: logprob ${lps[p]} is not ${c.id}'s ${c.logprobs![i]} (#${i})`);
  }
  cur.pos += c.sampled.length;
}

/**
 * True when `ids[pos..pos+len)` splits into one part per member of `group`, each
 * a suffix of that member's prompt lying beyond the previous member's prompt,
 * the prompts extending one another.
 */
function decompose(ids: readonly number[], pos: number, len: number, prev: Capture, group: readonly Capture[]): boolean {
  const [m, ...rest] = group;
  if (!isPrefix(prev.prompt, m.prompt) || m.prompt.length === prev.prompt.length) return false;
  const tail = m.prompt.length - prev.prompt.length;
  const fits = (l: number) => sliceEquals(ids, pos, m.prompt, m.prompt.length - l, l);
  if (rest.length === 0) return len <= tail && fits(len);
  for (let l = Math.min(len, tail); l >= 0; l--) {
    if (fits(l) && decompose(ids, pos + l, len - l, m, rest)) return true;
  }
  return false;
}

function matchesSampledAt(t: Trace, pos: number, c: Capture): boolean {
  return sliceEquals(t.response_ids, pos, c.sampled, 0, c.sampled.length);
}

function searchFirst(t: Trace, idx: CaptureIndex): Capture {
  const k = prefixHash(t.prompt_ids, checkpointHashes(t.prompt_ids), t.prompt_ids.length);
  const found = (idx.byPrompt.get(k) ?? []).find(
    (c) => c.prompt.length === t.prompt_ids.length && isPrefix(c.prompt, t.prompt_ids) && matchesSampledAt(t, 0, c),
  );
  if (!found) throw new TraceError("no captured completion has this prompt and these first sampled ids");
  return found;
}

function searchNext(cur: Cursor, run: number, prev: Capture, idx: CaptureIndex, taken: readonly Capture[]): Capture {
  const n = prev.prompt.length;
  const ph = idx.hashAt(prev, n);
  const found = idx.all.find(
    (c) =>
      c.index > prev.index &&
      c.sampled.length > 0 &&
      !taken.includes(c) &&
      c.prompt.length > n &&
      idx.hashAt(c, n) === ph &&
      decompose(cur.t.response_ids, cur.pos, run, prev, [c]) &&
      matchesSampledAt(cur.t, cur.pos + run, c),
  );
  if (!found) throw new TraceError(`response position ${cur.pos}: no captured completion continues after ${prev.id}`);
  return found;
}
