/**
 * Request routing: which vendor API a call speaks and which operation it asks
 * for, from the path first, then the headers, then the body shape; and the
 * session credential the call carries.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { Json } from "./chat-types.ts";
import type { ApiType } from "./dialect.ts";
import { decodeSegment } from "../util/uri.ts";
import { PolarError } from "../protocol/errors.ts";
import { LIMITS } from "../protocol/schemas.ts";

export type Operation = "generate" | "count_tokens" | "list_models" | "get_model";

export interface Route {
  /** Undefined when only the body can tell (see detectByBody). */
  apiType?: ApiType;
  op: Operation;
  /** The model named in a Google path (`models/<m>:generateContent`) or a model GET. */
  pathModel?: string;
  /** Google's streamGenerateContent. */
  googleStream?: boolean;
  /** The path could not be decoded: answered as this error, in the route's dialect. */
  pathError?: Error;
}

/** A route whose model segment is decoded, or carries the decoding error. */
function withModel(route: Route, raw: string): Route {
  try {
    const pathModel = decodeSegment(raw, "the model in the path");
    if (pathModel.length > LIMITS.nameChars) {
      throw new PolarError("validation", `the model in the path is longer than the limit of ${LIMITS.nameChars} characters`);
    }
    return { ...route, pathModel };
  } catch (err) {
    return { ...route, pathError: err as Error };
  }
}

const GOOGLE_RE = /\/models\/([^/:]+):(generateContent|streamGenerateContent|countTokens)$/;

/** Detects from method, path and headers; undefined means "not a route of this proxy". */
export function detectRoute(method: string, path: string, headers: IncomingHttpHeaders): Route | undefined {
  const p = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
  if (method === "GET") return detectGet(p, headers);
  if (method !== "POST") return undefined;
  if (p.endsWith("/messages/count_tokens")) return { apiType: "anthropic", op: "count_tokens" };
  if (p.endsWith("/messages")) return { apiType: "anthropic", op: "generate" };
  if (p.endsWith("/chat/completions")) return { apiType: "openai_chat", op: "generate" };
  if (p.endsWith("/responses")) return { apiType: "openai_responses", op: "generate" };
  const g = GOOGLE_RE.exec(p);
  if (g) {
    const op = g[2] === "countTokens" ? "count_tokens" : "generate";
    return withModel({ apiType: "google", op, googleStream: g[2] === "streamGenerateContent" }, g[1]);
  }
  if (headers["anthropic-version"] !== undefined) return { apiType: "anthropic", op: "generate" };
  return { op: "generate" };
}

function detectGet(p: string, headers: IncomingHttpHeaders): Route | undefined {
  const m = /^(?:.*?)\/(v1|v1beta|v1alpha)\/models(?:\/(.+))?$/.exec(p);
  if (!m) return undefined;
  const apiType: ApiType = m[1] !== "v1" ? "google" : headers["anthropic-version"] !== undefined ? "anthropic" : "openai_chat";
  if (m[2] === undefined) return { apiType, op: "list_models" };
  return withModel({ apiType, op: "get_model" }, m[2]);
}

/** Body-shape detection for a POST whose path and headers did not tell. */
export function detectByBody(body: Json): ApiType {
  if (Array.isArray(body.contents)) return "google";
  if ("input" in body && ("instructions" in body || !("messages" in body))) return "openai_responses";
  if (typeof body.max_tokens === "number" && (typeof body.system !== "undefined" || Array.isArray(body.messages)) && isAnthropicShaped(body)) {
    return "anthropic";
  }
  return "openai_chat";
}

/** Anthropic bodies carry `system` at the top level or content blocks with tool_use/tool_result. */
function isAnthropicShaped(body: Json): boolean {
  if (body.system !== undefined) return true;
  const msgs = body.messages as Json[];
  return msgs.some((m) => Array.isArray(m?.content) && (m.content as Json[]).some((b) => b?.type === "tool_use" || b?.type === "tool_result"));
}

/** Splits `/s/<credential>/rest` into the credential and the rest of the path. */
export function splitCredentialPath(path: string): { credential?: string; path: string } {
  if (!path.startsWith("/s/")) return { path };
  const end = path.indexOf("/", 3);
  const raw = end < 0 ? path.slice(3) : path.slice(3, end);
  if (!raw) return { path };
  return { credential: decodeSegment(raw, "the credential in the path"), path: end < 0 ? "/" : path.slice(end) };
}

/** The credential in the headers: Authorization Bearer, then x-api-key, then x-goog-api-key, then `?key=`. */
export function headerCredential(headers: IncomingHttpHeaders, query: URLSearchParams | undefined): string | undefined {
  const auth = headers.authorization;
  if (typeof auth === "string") {
    const m = /^\s*Bearer\s+(.+?)\s*$/i.exec(auth);
    if (m) return m[1];
  }
  const key = first(headers["x-api-key"]) ?? first(headers["x-goog-api-key"]);
  if (key) return key.trim();
  return query?.get("key") ?? undefined;
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v || undefined;
}
