/**
 * OpenAI chat answer to a Responses `Response`: a reasoning item (summary and
 * `encrypted_content` carrying the text, so a stateless client such as Codex
 * hands it back), the assistant message, then one item per tool call in the
 * kind the client declared (function_call with its namespace,
 * custom_tool_call, local_shell_call).
 */
import type { ChatResponse, ChatToolCall, Json } from "../chat-types.ts";
import { isObject } from "../chat-types.ts";
import { finishMapping } from "../finish-reasons.ts";
import { encodeReasoning, hexId, parseArguments, splitCached } from "../ids.ts";
import { toolKinds, type ToolKind } from "./responses-tools.ts";

export function responsesOutput(resp: ChatResponse, body: Json): Json[] {
  const m = resp.choices[0]?.message;
  const out: Json[] = [];
  if (m?.reasoning_content) {
    out.push({
      id: hexId("rs_", 32), type: "reasoning",
      summary: [{ type: "summary_text", text: m.reasoning_content }],
      encrypted_content: encodeReasoning(m.reasoning_content),
    });
  }
  if (m?.content || !m?.tool_calls?.length) {
    out.push({
      id: hexId("msg_", 32), type: "message", role: "assistant", status: "completed",
      content: [{ type: "output_text", text: m?.content ?? "", annotations: [], logprobs: [] }],
    });
  }
  const kinds = toolKinds(body);
  for (const tc of m?.tool_calls ?? []) out.push(callItem(tc, kinds.get(tc.function.name)));
  return out;
}

function callId(tc: ChatToolCall): string {
  return tc.id?.startsWith("call_") ? tc.id : hexId("call_");
}

function callItem(tc: ChatToolCall, kind: ToolKind | undefined): Json {
  const call_id = callId(tc);
  if (kind?.kind === "custom") {
    const input = parseArguments(tc.function.arguments).input;
    const item: Json = { id: hexId("ctc_", 32), type: "custom_tool_call", status: "completed", call_id, name: kind.name, input: typeof input === "string" ? input : tc.function.arguments };
    if (kind.namespace) item.namespace = kind.namespace;
    return item;
  }
  if (kind?.kind === "shell") {
    const args = parseArguments(tc.function.arguments);
    const command = Array.isArray(args.command) ? args.command : typeof args.command === "string" ? ["bash", "-lc", args.command] : [];
    return { id: hexId("lsh_", 32), type: "local_shell_call", status: "completed", call_id, action: { type: "exec", ...args, command, env: isObject(args.env) ? args.env : {} } };
  }
  const item: Json = { id: hexId("fc_", 32), type: "function_call", status: "completed", call_id, name: kind?.name ?? tc.function.name, arguments: tc.function.arguments };
  if (kind?.kind === "function" && kind.namespace) item.namespace = kind.namespace;
  return item;
}

export function responsesUsage(resp: ChatResponse): Json {
  const { cached } = splitCached(resp.usage as Json | undefined);
  const input = resp.usage?.prompt_tokens ?? 0;
  const output = resp.usage?.completion_tokens ?? 0;
  return {
    input_tokens: input, input_tokens_details: { cached_tokens: cached },
    output_tokens: output, output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

/** The Response envelope; `output` and `usage` filled for the final object, empty for `response.created`. */
export function responseObject(resp: ChatResponse, body: Json, modelRequested: string, id: string, final: boolean, output: Json[]): Json {
  const mapping = finishMapping(resp.choices[0]?.finish_reason).responses;
  const status = final ? mapping.status : "in_progress";
  return {
    id, object: "response", created_at: resp.created ?? Math.floor(Date.now() / 1000), status,
    background: false, error: null,
    incomplete_details: final && mapping.reason ? { reason: mapping.reason } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: modelRequested,
    output: final ? output : [],
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: isObject(body.reasoning) ? { effort: body.reasoning.effort ?? null, summary: body.reasoning.summary ?? null } : { effort: null, summary: null },
    store: body.store ?? false,
    temperature: body.temperature ?? 1,
    text: isObject(body.text) ? body.text : { format: { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: Array.isArray(body.tools) ? body.tools : [],
    top_p: body.top_p ?? 1,
    truncation: body.truncation ?? "disabled",
    usage: final ? responsesUsage(resp) : null,
    metadata: isObject(body.metadata) ? body.metadata : {},
  };
}

export function responsesFromChat(resp: ChatResponse, body: Json, modelRequested: string): Json {
  return responseObject(resp, body, modelRequested, hexId("resp_", 32), true, responsesOutput(resp, body));
}
