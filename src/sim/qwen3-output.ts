/**
 * Qwen3's output format, both ways. `renderOutput` writes what the model
 * samples: an optional `<think>` block, content, `<tool_call>` blocks with
 * Python-`json.dumps`-spaced JSON, and `<|im_end|>`. `parseOutput` reads
 * generated text back the way vLLM's `qwen3` reasoning parser and `hermes`
 * tool parser do (no stripping: vLLM returns content after `</think>` with
 * its leading newlines).
 */
import type { StructuredOutput } from "./policy/types.ts";

export const THINK_START = "<think>";
export const THINK_END = "</think>";
export const TOOL_START = "<tool_call>";
export const TOOL_END = "</tool_call>";
export const IM_END = "<|im_end|>";

export interface ParsedToolCall {
  name: string;
  /** JSON text of the arguments, as vLLM's hermes parser re-serializes them. */
  arguments: string;
}

export interface ParsedOutput {
  reasoning: string | null;
  content: string | null;
  toolCalls: ParsedToolCall[];
}

/**
 * How tool calls are sampled: `auto` (Qwen's <tool_call> blocks, hermes-parsed),
 * `none` (no parsing), `required` (vLLM's JSON-schema constraint: a JSON array
 * of {name, parameters}) or a named function (the arguments object alone).
 */
export type ToolMode = "auto" | "none" | "required" | { name: string };

export function renderOutput(out: StructuredOutput, thinking: boolean, mode: ToolMode = "auto"): string {
  let text = thinking ? `${THINK_START}\n${out.think ?? ""}\n${THINK_END}\n\n` : "";
  if (typeof mode === "object") {
    const call = out.toolCalls.find((c) => c.name === mode.name) ?? out.toolCalls[0];
    return text + pyJson(call?.arguments ?? {}) + IM_END;
  }
  if (mode === "required" && out.toolCalls.length) {
    return text + pyJson(out.toolCalls.map((c) => ({ name: c.name, parameters: c.arguments }))) + IM_END;
  }
  text += out.content;
  out.toolCalls.forEach((call, i) => {
    if (i > 0 || out.content) text += "\n";
    text += `${TOOL_START}\n${pyJson({ name: call.name, arguments: call.arguments })}\n${TOOL_END}`;
  });
  return text + IM_END;
}

/** Parses generated text (end-of-turn token excluded) as vLLM does for the request's tool mode. */
export function parseOutput(text: string, mode: ToolMode): ParsedOutput {
  const { reasoning, content } = splitReasoning(text);
  if (typeof mode === "object") return { reasoning, content: "", toolCalls: [{ name: mode.name, arguments: content ?? "" }] };
  if (mode === "required") return parseRequired(reasoning, content);
  if (mode === "none" || content === null || !content.includes(TOOL_START)) return { reasoning, content, toolCalls: [] };
  const calls = parseToolCalls(content);
  if (!calls) return { reasoning, content, toolCalls: [] };
  const before = content.slice(0, content.indexOf(TOOL_START));
  return { reasoning, content: before || null, toolCalls: calls };
}

/** vLLM's Qwen3ReasoningParser: both tags needed, otherwise everything is content. */
export function splitReasoning(text: string): { reasoning: string | null; content: string | null } {
  if (!text.includes(THINK_START) || !text.includes(THINK_END)) return { reasoning: null, content: text };
  const afterStart = text.slice(text.indexOf(THINK_START) + THINK_START.length);
  const end = afterStart.indexOf(THINK_END);
  if (end < 0) return { reasoning: null, content: afterStart };
  const content = afterStart.slice(end + THINK_END.length);
  return { reasoning: afterStart.slice(0, end), content: content || null };
}

/** vLLM's "required" path: the content must be a JSON array of {name, parameters}. */
function parseRequired(reasoning: string | null, content: string | null): ParsedOutput {
  try {
    const list = JSON.parse(content ?? "") as Array<{ name?: unknown; parameters?: unknown }>;
    if (Array.isArray(list) && list.every((c) => c && typeof c.name === "string")) {
      return { reasoning, content: "", toolCalls: list.map((c) => ({ name: c.name as string, arguments: pyJson(c.parameters ?? {}) })) };
    }
  } catch {
    // Not a JSON list (the policy gave text, or max_tokens cut it): plain content.
  }
  return { reasoning, content, toolCalls: [] };
}

const TOOL_RE = /<tool_call>([\s\S]*?)<\/tool_call>|<tool_call>([\s\S]*)/g;

/** vLLM's hermes parser: every block must be JSON with a name, or no call is parsed at all. */
function parseToolCalls(content: string): ParsedToolCall[] | undefined {
  const out: ParsedToolCall[] = [];
  for (const m of content.matchAll(TOOL_RE)) {
    let v: unknown;
    try {
      v = JSON.parse(m[1] ?? m[2]);
    } catch {
      return undefined;
    }
    const o = v as Record<string, unknown> | null;
    if (!o || typeof o !== "object" || typeof o.name !== "string") return undefined;
    out.push({ name: o.name, arguments: pyJson(o.arguments ?? null) });
  }
  return out;
}

/** JSON as Python's json.dumps writes it by default with ensure_ascii=False: ", " and ": " separators. */
export function pyJson(v: unknown): string {
  if (v === null || v === undefined) return "null";
  if (Array.isArray(v)) return `[${v.map(pyJson).join(", ")}]`;
  if (typeof v === "object") {
    const parts = Object.entries(v as Record<string, unknown>).map(([k, x]) => `${JSON.stringify(k)}: ${pyJson(x)}`);
    return `{${parts.join(", ")}}`;
  }
  return JSON.stringify(v);
}
