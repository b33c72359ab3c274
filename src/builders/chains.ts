/**
 * Grouping completions into chains by the strict token-prefix relation of
 * their prompts (reference §3.1), and deciding at join time where each
 * member's interstitial starts.
 *
 * A completion joins the chain whose tip (the prompt of its latest member) is
 * the longest prefix of its prompt (ties: the earliest chain); otherwise it
 * starts a chain, and `startReason` says why. Joining an identical prompt is a
 * retry: the new answer replaces the chain's latest one. Joining a longer
 * prompt cuts the tail `P[tip.length..]` after its first end-of-turn token
 * (at it, if the previous answer did not end with one, so the canonical token
 * is inserted); when there is no end-of-turn token to cut at, the member
 * stays in the chain but is marked as a break, so it starts a new trace.
 *
 * Cost: one hashing pass per prompt, one O(STRIDE) hash check per open chain,
 * one exact prefix comparison per join: linear in the total number of tokens.
 */
import type { Capture } from "./extract.ts";
import { checkpointHashes, commonPrefix, prefixHash, sliceEquals } from "./prefix-hash.ts";

export type Link =
  | { kind: "start"; reason: string; detail?: Record<string, unknown> }
  | { kind: "break"; reason: string }
  /** Interstitial = `prompt[cut..]`; `insertedEot` when it begins with the canonical end-of-turn. */
  | { kind: "join"; cut: number; insertedEot: boolean; echoMatches: boolean };

export interface Member {
  capture: Capture;
  link: Link;
  /** Earlier answers to the identical prompt that this one superseded. */
  superseded: Capture[];
}

export interface Chain {
  index: number;
  members: Member[];
  /** Chains holding a superseded retry alone never take new members. */
  closed: boolean;
  /** Checkpoint hashes and full hash of the tip's prompt. */
  tipHashes: Uint32Array;
  tipHash: number;
}

export interface GroupOptions {
  eot: number | null;
  supersededRetries: "drop" | "own_trace";
  /** The `<think>` token, if known: lets a new chain's reason say that reasoning was stripped. */
  thinkTokenId?: number;
}

export interface Grouping {
  chains: Chain[];
  /** Superseded answers that are in no chain (policy "drop"). */
  dropped: { capture: Capture; by: Capture; chain: number }[];
  retries: { capture: Capture; superseded: Capture; chain: number }[];
}

const tipOf = (ch: Chain) => ch.members[ch.members.length - 1].capture;

export function groupChains(captures: readonly Capture[], opts: GroupOptions): Grouping {
  const out: Grouping = { chains: [], dropped: [], retries: [] };
  for (const c of captures) {
    const hashes = checkpointHashes(c.prompt);
    const full = prefixHash(c.prompt, hashes, c.prompt.length);
    const chain = c.prompt.length ? findChain(out.chains, c.prompt, hashes) : undefined;
    if (!chain) {
      const link: Link = { kind: "start", ...startReason(out.chains, c, hashes, opts) };
      out.chains.push({ index: out.chains.length, members: [{ capture: c, link, superseded: [] }], closed: false, tipHashes: hashes, tipHash: full });
    } else if (tipOf(chain).prompt.length === c.prompt.length) {
      retry(out, chain, c, opts);
    } else {
      chain.members.push({ capture: c, link: joinLink(tipOf(chain), c, opts.eot), superseded: [] });
      chain.tipHashes = hashes;
      chain.tipHash = full;
    }
  }
  return out;
}

function findChain(chains: readonly Chain[], prompt: readonly number[], hashes: Uint32Array): Chain | undefined {
  // Hash hits first, then exact confirmation of the longest only (earlier chain on ties),
  // so a join costs one exact comparison unless a hash collides.
  const hits: Chain[] = [];
  for (const ch of chains) {
    const n = tipOf(ch).prompt.length;
    if (!ch.closed && n > 0 && n <= prompt.length && prefixHash(prompt, hashes, n) === ch.tipHash) hits.push(ch);
  }
  hits.sort((a, b) => tipOf(b).prompt.length - tipOf(a).prompt.length || a.index - b.index);
  return hits.find((ch) => sliceEquals(tipOf(ch).prompt, 0, prompt, 0, tipOf(ch).prompt.length));
}

function retry(out: Grouping, chain: Chain, c: Capture, opts: GroupOptions): void {
  const last = chain.members[chain.members.length - 1];
  const old = last.capture;
  out.retries.push({ capture: c, superseded: old, chain: chain.index });
  chain.members[chain.members.length - 1] = { capture: c, link: last.link, superseded: [...last.superseded, old] };
  if (opts.supersededRetries === "drop") {
    out.dropped.push({ capture: old, by: c, chain: chain.index });
    return;
  }
  const link: Link = { kind: "start", reason: "superseded_retry", detail: { superseded_by: c.id, retry_of_chain: chain.index } };
  out.chains.push({ index: out.chains.length, members: [{ capture: old, link, superseded: [] }], closed: true, tipHashes: new Uint32Array(1), tipHash: 0 });
}

function joinLink(prev: Capture, c: Capture, eot: number | null): Link {
  if (eot === null) return { kind: "break", reason: "end_of_turn_unknown" };
  const start = prev.prompt.length;
  const k = c.prompt.indexOf(eot, start);
  if (k < 0) return { kind: "break", reason: "no_end_of_turn_in_tail" };
  const raw = prev.sampled;
  const closed = raw.length > 0 && raw[raw.length - 1] === eot;
  const body = closed ? raw.length - 1 : raw.length;
  const echoMatches = k - start === body && sliceEquals(c.prompt, start, raw, 0, body);
  return { kind: "join", cut: closed ? k + 1 : k, insertedEot: !closed, echoMatches };
}

function startReason(chains: readonly Chain[], c: Capture, hashes: Uint32Array, opts: GroupOptions): { reason: string; detail?: Record<string, unknown> } {
  if (c.prompt.length === 0) return { reason: "no_prompt_ids" };
  let nearest: Chain | undefined;
  let lcp = -1;
  for (const ch of chains) {
    if (ch.closed) continue;
    const n = commonPrefix(c.prompt, hashes, tipOf(ch).prompt, ch.tipHashes);
    if (n > lcp) [nearest, lcp] = [ch, n];
  }
  if (!nearest) return { reason: chains.length ? "no_open_chain" : "first" };
  const tip = tipOf(nearest).prompt;
  const detail: Record<string, unknown> = { nearest_chain: nearest.index, common_prefix: lcp, tip_length: tip.length };
  if (lcp === c.prompt.length) return { reason: "prompt_is_prefix_of_tip", detail };
  if (opts.thinkTokenId !== undefined && count(tip, opts.thinkTokenId, lcp) > count(c.prompt, opts.thinkTokenId, lcp)) {
    detail.reasoning_stripped = true;
  }
  return { reason: lcp === 0 ? "unrelated_prompt" : "diverged_from_tip", detail };
}

function count(ids: readonly number[], tok: number, from: number): number {
  let n = 0;
  for (let i = ids.indexOf(tok, from); i >= 0; i = ids.indexOf(tok, i + 1)) n++;
  return n;
}
