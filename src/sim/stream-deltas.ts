/**
 * Streaming deltas that agree with the non-streaming parse: given the whole
 * (already sampled) generation and its parse, each token maps to a reasoning
 * delta, a content delta, nothing (tags, tool-call body, EOS), or, on a
 * `</tool_call>` token, one complete tool call. Text is detokenized
 * incrementally and held back while it ends in a partial UTF-8 character.
 */
import type { ChatTokenizer } from "../tokenizer/qwen3.ts";
import type { Generation } from "./generation.ts";
import type { ParsedOutput } from "./qwen3-output.ts";

export interface ToolCallDelta {
  index: number;
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface Delta {
  reasoning?: string;
  content?: string;
  toolCalls?: ToolCallDelta[];
}

type Region = "reasoning" | "content" | "tool" | "none";

export class DeltaTracker {
  readonly #tok: ChatTokenizer;
  readonly #regions: Region[];
  readonly #toolEnds: Map<number, number>;
  readonly #toolIds: string[];
  readonly #parsed: ParsedOutput;
  #pending: number[] = [];
  #pendingRegion: Region = "none";
  #sent = 0;

  /** `json`: tool calls are the whole answer after reasoning (required or named tool choice). */
  constructor(tok: ChatTokenizer, gen: Generation, parsed: ParsedOutput, toolIds: string[], calls: "tags" | "json" = "tags") {
    this.#tok = tok;
    this.#parsed = parsed;
    this.#toolIds = toolIds;
    const { regions, toolEnds } = classify(tok, gen.ids, parsed, calls === "json" && parsed.toolCalls.length > 0);
    this.#regions = regions;
    this.#toolEnds = toolEnds;
  }

  /** The delta for token `i` (tokens must be fed in order). */
  next(i: number, id: number, last: boolean): Delta {
    const region = this.#regions[i];
    const delta: Delta = {};
    if (region !== this.#pendingRegion) this.#flush(delta, true);
    if (region === "reasoning" || region === "content") {
      this.#pendingRegion = region;
      this.#pending.push(id);
    }
    this.#flush(delta, last);
    const k = this.#toolEnds.get(i);
    // A call whose closing tag was cut off by max_tokens but still parsed goes out with the last token.
    const upTo = last ? this.#parsed.toolCalls.length : k === undefined ? this.#sent : k + 1;
    if (upTo > this.#sent) {
      delta.toolCalls = [];
      for (; this.#sent < upTo; this.#sent++) delta.toolCalls.push(this.#callDelta(this.#sent));
    }
    return delta;
  }

  #callDelta(k: number): ToolCallDelta {
    const call = this.#parsed.toolCalls[k];
    return { index: k, id: this.#toolIds[k], type: "function", function: { name: call.name, arguments: call.arguments } };
  }

  #flush(delta: Delta, force: boolean): void {
    if (!this.#pending.length) return;
    const text = this.#tok.decode(this.#pending, { skipSpecialTokens: true });
    if (!force && text.endsWith("\uFFFD")) return;
    if (this.#pendingRegion === "reasoning") delta.reasoning = (delta.reasoning ?? "") + text;
    else delta.content = (delta.content ?? "") + text;
    this.#pending = [];
  }
}

function classify(tok: ChatTokenizer, ids: readonly number[], parsed: ParsedOutput, jsonCalls: boolean) {
  const special = (s: string) => tok.encode(s)[0];
  const [thinkStart, thinkEnd, toolStart, toolEnd] = ["<think>", "</think>", "<tool_call>", "</tool_call>"].map(special);
  const regions: Region[] = [];
  const toolEnds = new Map<number, number>();
  const afterThink: Region = jsonCalls ? "tool" : "content";
  let state: Region = parsed.reasoning !== null ? "none" : afterThink;
  let thinkDone = parsed.reasoning === null;
  let calls = 0;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (id === tok.eotTokenId) regions.push("none");
    else if (!thinkDone && id === thinkStart && state === "none") {
      regions.push("none");
      state = "reasoning";
    } else if (!thinkDone && id === thinkEnd && state === "reasoning") {
      regions.push("none");
      state = afterThink;
      thinkDone = true;
    } else if (state === "content" && parsed.toolCalls.length && id === toolStart) {
      regions.push("tool");
      state = "tool";
    } else if (state === "tool") {
      regions.push("tool");
      if (id === toolEnd && calls < parsed.toolCalls.length) toolEnds.set(i, calls++);
    } else regions.push(state === "none" ? "content" : state);
  }
  return { regions, toolEnds };
}
