/**
 * Responses tools as chat function tools, and the way back: which chat tool
 * name is a plain function, a function inside a namespace, a custom
 * (freeform) tool or the local shell.
 */
import type { ChatRequest, Json } from "../chat-types.ts";
import { isObject } from "../chat-types.ts";

export type ToolKind =
  | { kind: "function"; name: string; namespace?: string }
  | { kind: "custom"; name: string; namespace?: string }
  | { kind: "shell" };

const SHELL_SCHEMA = {
  type: "object",
  properties: {
    command: { type: "array", items: { type: "string" }, description: "The command and its arguments" },
    working_directory: { type: "string" },
    timeout_ms: { type: "number" },
  },
  required: ["command"],
};

const CUSTOM_SCHEMA = { type: "object", properties: { input: { type: "string", description: "The raw tool input" } }, required: ["input"] };

/** Chat tool name → what it is on the Responses side. */
export function toolKinds(body: Json): Map<string, ToolKind> {
  const kinds = new Map<string, ToolKind>();
  for (const t of listTools(body)) {
    if (t.type === "namespace" && typeof t.name === "string" && Array.isArray(t.tools)) {
      for (const inner of t.tools.filter(isObject)) {
        if (typeof inner.name !== "string") continue;
        kinds.set(`${t.name}__${inner.name}`, { kind: inner.type === "custom" ? "custom" : "function", name: inner.name, namespace: t.name });
      }
    } else if (t.type === "custom" && typeof t.name === "string") kinds.set(t.name, { kind: "custom", name: t.name });
    else if (t.type === "local_shell" || t.type === "shell") kinds.set("shell", { kind: "shell" });
    else if (t.type === "function") {
      const name = typeof t.name === "string" ? t.name : isObject(t.function) ? t.function.name : undefined;
      if (typeof name === "string") kinds.set(name, { kind: "function", name });
    }
  }
  return kinds;
}

function listTools(body: Json): Json[] {
  return Array.isArray(body.tools) ? (body.tools as unknown[]).filter(isObject) : [];
}

function fn(name: string, description: unknown, parameters: unknown): Json {
  return { type: "function", function: { name, description: typeof description === "string" ? description : "", parameters: parameters ?? { type: "object", properties: {} } } };
}

function convertTool(t: Json): Json[] {
  if (t.type === "function") {
    if (isObject(t.function)) return [{ type: "function", function: t.function }];
    if (typeof t.name !== "string") return [];
    return [fn(t.name, t.description, t.parameters ?? (isObject(t.inputSchema) ? t.inputSchema.jsonSchema : undefined) ?? t.input_schema)];
  }
  if (t.type === "namespace" && typeof t.name === "string" && Array.isArray(t.tools)) {
    return t.tools.filter(isObject).flatMap((inner) => {
      if (typeof inner.name !== "string") return [];
      const desc = [t.description, inner.description].filter((d) => typeof d === "string" && d).join(" — ");
      return [fn(`${t.name}__${inner.name}`, desc, inner.type === "custom" ? CUSTOM_SCHEMA : inner.parameters)];
    });
  }
  if (t.type === "custom" && typeof t.name === "string") return [fn(t.name, t.description, CUSTOM_SCHEMA)];
  if (t.type === "local_shell" || t.type === "shell") return [fn("shell", "Runs a shell command and returns its output.", SHELL_SCHEMA)];
  return []; // built-in server tools (web_search, file_search, …) have no client-side executor here
}

export function addResponsesTools(body: Json, req: ChatRequest): void {
  const tools = listTools(body).flatMap(convertTool);
  if (!tools.length) return;
  req.tools = tools;
  const c = body.tool_choice;
  if (c === "none" || c === "auto" || c === "required") req.tool_choice = c;
  else if (isObject(c) && (c.type === "function" || c.type === "custom") && typeof c.name === "string") {
    req.tool_choice = { type: "function", function: { name: c.name } };
  } else if (isObject(c) && (c.type === "local_shell" || c.type === "shell")) {
    req.tool_choice = { type: "function", function: { name: "shell" } };
  } else req.tool_choice = "auto";
}
