/**
 * Turning one chain into traces (reference §3.3, without its data loss).
 *
 * A chain is cut into segments where a member could not be joined (no
 * end-of-turn token to cut at) and where logprob alignment changes (a member
 * whose sampled ids have no aligned logprobs goes into a trace with
 * `response_logprobs: null`, so its neighbours keep theirs). Members with no
 * sampled ids fit either kind. Each segment becomes one trace:
 * `prompt_ids` = the first member's captured prompt; `response_ids` = its
 * sampled ids, then for each later member its interstitial (the tail of its
 * own captured prompt, mask 0, logprob 0.0) and its sampled ids (mask 1,
 * real logprobs).
 */
import { PolarError } from "../protocol/errors.ts";
import type { Trace } from "../protocol/schemas.ts";
import type { Chain, Member } from "./chains.ts";
import { promptMessageCount, promptMessages, requestTools, responseMessages, type Dict } from "./extract.ts";

export interface Segment {
  chain: number;
  /** Position of the segment within its chain. */
  index: number;
  members: Member[];
  /** Why this segment did not continue the previous one (null for a chain's first). */
  splitReason: string | null;
  /** True: every non-empty member has aligned logprobs; false: none has; null: no sampled ids. */
  aligned: boolean | null;
}

const alignment = (m: Member): boolean | null => (m.capture.sampled.length === 0 ? null : m.capture.logprobs !== null);

export function segmentChain(chain: Chain): Segment[] {
  const segments: Segment[] = [];
  let seg: Segment | undefined;
  for (const m of chain.members) {
    const a = alignment(m);
    let reason: string | null = null;
    if (m.link.kind === "break") reason = m.link.reason;
    else if (seg && a !== null && seg.aligned !== null && a !== seg.aligned) reason = a ? "after_unaligned_logprobs" : "unaligned_logprobs";
    if (!seg || reason !== null) {
      seg = { chain: chain.index, index: segments.length, members: [], splitReason: seg ? reason : null, aligned: null };
      segments.push(seg);
    }
    seg.members.push(m);
    seg.aligned ??= a;
  }
  return segments;
}

export function segmentTrace(seg: Segment, traceIndex: number): Trace {
  const first = seg.members[0];
  const ids: number[] = [];
  const mask: (0 | 1)[] = [];
  const lps: number[] | null = seg.aligned ? [] : null;
  const responseMsgs: Dict[] = [];
  let msgAcc = promptMessageCount(first.capture);
  for (const [i, m] of seg.members.entries()) {
    const c = m.capture;
    if (i > 0) {
      if (m.link.kind !== "join") throw new PolarError("builder", `member ${c.id} of a segment is not joined`);
      for (let p = m.link.cut; p < c.prompt.length; p++) {
        ids.push(c.prompt[p]);
        mask.push(0);
        lps?.push(0);
      }
      const n = promptMessageCount(c);
      if (n > msgAcc) responseMsgs.push(...promptMessages(c, msgAcc));
      msgAcc = Math.max(msgAcc, n);
    }
    for (let p = 0; p < c.sampled.length; p++) {
      ids.push(c.sampled[p]);
      mask.push(1);
      lps?.push(c.logprobs![p]);
    }
    const resp = responseMessages(c);
    responseMsgs.push(...resp);
    msgAcc += resp.length;
  }
  const last = seg.members[seg.members.length - 1].capture;
  return {
    prompt_ids: [...first.capture.prompt],
    response_ids: ids,
    loss_mask: mask,
    prompt_messages: promptMessages(first.capture),
    response_messages: responseMsgs,
    tools: requestTools(first.capture),
    finish_reason: last.finishReason,
    response_logprobs: lps,
    reward: null,
    reward_components: {},
    metadata: traceMetadata(seg, traceIndex),
  };
}

function traceMetadata(seg: Segment, traceIndex: number): Record<string, unknown> {
  const first = seg.members[0];
  const meta: Record<string, unknown> = {
    ...first.capture.record.metadata,
    completion_metadata: seg.members.map((m) => ({ ...m.capture.record.metadata })),
    completion_ids: seg.members.map((m) => m.capture.id),
    builder_trace_index: traceIndex,
    chain_index: seg.chain,
    chain_segment: seg.index,
    split_reason: seg.splitReason,
  };
  if (first.link.kind === "start") meta.chain_start_reason = first.link.reason;
  const superseded = seg.members.flatMap((m) => m.superseded.map((s) => s.id));
  if (superseded.length) meta.superseded_completion_ids = superseded;
  const unaligned = seg.members.filter((m) => m.capture.logprobIssue).map((m) => m.capture.id);
  if (unaligned.length) meta.unaligned_logprob_completion_ids = unaligned;
  return meta;
}
