/**
 * What a policy sees: the rendered prompt text, read back the way a model
 * reads it. Every endpoint (chat, completions, SGLang /generate with ids)
 * reduces to prompt text, so a policy is a function of the prompt alone,
 * exactly like a real model. Parses Qwen3 ChatML: the tool list in the first
 * system block, turns, tool responses, and the generation prompt's thinking
 * state.
 */

export interface PromptTurn {
  role: string;
  content: string;
}

export interface OfferedTool {
  name: string;
  /** JSON-schema property names of the tool's parameters, with their declared types. */
  params: Record<string, string>;
}

export interface PromptContext {
  text: string;
  turns: PromptTurn[];
  tools: OfferedTool[];
  /** The last user turn that is not a tool response (the task instruction), or the whole text. */
  query: string;
  /** All user text that is not tool responses, joined by newlines. */
  userText: string;
  /** Assistant turns after the last query: which step of a playbook rule comes next. */
  step: number;
  /** The prompt ends in an open assistant turn (a chat generation prompt). */
  chat: boolean;
  /** Generation starts inside a thinking-capable turn (no empty think block pre-filled). */
  thinking: boolean;
}

const TURN = /<\|im_start\|>(\w+)\n([\s\S]*?)(?:<\|im_end\|>\n?|$)/g;
const GEN_OPEN = "<|im_start|>assistant\n";
const EMPTY_THINK = "<think>\n\n</think>\n\n";

export function readPrompt(text: string): PromptContext {
  const turns: PromptTurn[] = [];
  for (const m of text.matchAll(TURN)) turns.push({ role: m[1], content: m[2] });
  const open = openGeneration(text);
  if (open !== null && turns.length) turns.pop();
  const tools = turns[0]?.role === "system" ? parseTools(turns[0].content) : [];
  let lastQuery = -1;
  for (let i = turns.length - 1; i >= 0; i--) {
    if (turns[i].role === "user" && !isToolResponse(turns[i].content)) {
      lastQuery = i;
      break;
    }
  }
  const userText = turns
    .filter((t) => t.role === "user" && !isToolResponse(t.content))
    .map((t) => t.content)
    .join("\n");
  const step = lastQuery < 0 ? 0 : turns.slice(lastQuery + 1).filter((t) => t.role === "assistant").length;
  return {
    text,
    turns,
    tools,
    query: lastQuery >= 0 ? turns[lastQuery].content : turns.length ? userText : text,
    userText: turns.length ? userText : text,
    step,
    chat: open !== null,
    thinking: open === "",
  };
}

/** The text after a trailing generation prompt ("" or the empty think block), or null if none. */
function openGeneration(text: string): string | null {
  if (text.endsWith(GEN_OPEN)) return "";
  if (text.endsWith(GEN_OPEN + EMPTY_THINK)) return EMPTY_THINK;
  return null;
}

function isToolResponse(content: string): boolean {
  return content.startsWith("<tool_response>") || content.startsWith("\n<tool_response>");
}

function parseTools(system: string): OfferedTool[] {
  const start = system.indexOf("<tools>\n");
  const end = system.indexOf("\n</tools>", start);
  if (start < 0 || end < 0) return [];
  const out: OfferedTool[] = [];
  for (const line of system.slice(start + 8, end).split("\n")) {
    const tool = parseToolLine(line);
    if (tool) out.push(tool);
  }
  return out;
}

function parseToolLine(line: string): OfferedTool | undefined {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return undefined;
  }
  const o = v as Record<string, unknown>;
  const fn = (o.function ?? o) as Record<string, unknown>;
  if (typeof fn.name !== "string") return undefined;
  const schema = (fn.parameters ?? fn.input_schema ?? {}) as Record<string, unknown>;
  const props = (schema.properties ?? {}) as Record<string, Record<string, unknown>>;
  const params: Record<string, string> = {};
  for (const [k, p] of Object.entries(props)) params[k] = typeof p?.type === "string" ? p.type : "any";
  return { name: fn.name, params };
}
