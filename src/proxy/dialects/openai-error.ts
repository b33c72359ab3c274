/** OpenAI's error body, shared by the Chat Completions and Responses dialects. */
import type { PolarError } from "../../protocol/errors.ts";
import type { ErrorReply } from "../dialect.ts";
import { errorDetails, errorStatus } from "../errors.ts";

const TYPES: Partial<Record<PolarError["code"], string>> = {
  validation: "invalid_request_error",
  payload_too_large: "invalid_request_error",
  unsupported_media_type: "invalid_request_error",
  context_length: "invalid_request_error",
  not_found: "invalid_request_error",
  unauthorized: "authentication_error",
  forbidden: "permission_error",
  timeout: "timeout_error",
};

export function openaiErrorReply(err: PolarError): ErrorReply {
  const status = errorStatus(err);
  const d = errorDetails(err);
  const type = TYPES[err.code] ?? (status >= 500 ? "server_error" : "invalid_request_error");
  const code = d.reason ?? (err.code === "context_length" ? "context_length_exceeded" : null);
  const param = d.param ?? (err.code === "context_length" ? "messages" : null);
  const headers = status === 401 ? { "www-authenticate": "Bearer" } : undefined;
  return { status, body: { error: { message: err.message, type, param, code } }, headers };
}
