/** Model listing routes (GET /v1/models, GET /v1beta/models), each in its vendor's shape. */
import type { Json } from "./chat-types.ts";
import type { Route } from "./detect.ts";
import type { ApiType } from "./dialect.ts";

const CREATED = 1_700_000_000;

export function answerMeta(route: Route, apiType: ApiType, model: string): Json {
  const id = route.op === "get_model" && route.pathModel ? route.pathModel.replace(/^models\//, "") : model;
  const one = modelEntry(apiType, id);
  if (route.op === "get_model") return one;
  if (apiType === "google") return { models: [one] };
  if (apiType === "anthropic") return { data: [one], has_more: false, first_id: id, last_id: id };
  return { object: "list", data: [one] };
}

function modelEntry(apiType: ApiType, id: string): Json {
  if (apiType === "google") {
    return {
      name: `models/${id}`, version: "001", displayName: id, description: "served model",
      inputTokenLimit: 131072, outputTokenLimit: 32768,
      supportedGenerationMethods: ["generateContent", "streamGenerateContent", "countTokens"],
    };
  }
  if (apiType === "anthropic") return { type: "model", id, display_name: id, created_at: new Date(CREATED * 1000).toISOString() };
  return { id, object: "model", created: CREATED, owned_by: "polar" };
}
