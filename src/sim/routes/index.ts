/** The route table: "METHOD /path" -> handler. */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { SimEngine } from "../engine.ts";
import { sendJson, sendText } from "../http.ts";
import { adminState, handleMetrics, handleSetVersion, handleSetWeights, weightsState } from "./admin.ts";
import { handleChat } from "./chat.ts";
import { handleCompletions } from "./completions.ts";
import { handleGenerate } from "./sglang.ts";
import { handleDetokenize, handleTokenize } from "./tokenize.ts";

export interface RouteCall {
  req: IncomingMessage;
  res: ServerResponse;
  body: unknown;
  url: URL;
  signal: AbortSignal;
}

export type Route = (call: RouteCall) => void | Promise<void>;

export function routes(engine: SimEngine): Map<string, Route> {
  const started = Math.floor(Date.now() / 1000);
  const model = { id: engine.opts.modelName, object: "model", created: started, owned_by: "vllm", root: engine.opts.modelName, parent: null, max_model_len: engine.opts.maxModelLen, permission: [] };
  const pause: Route = ({ res }) => {
    engine.scheduler.pause();
    sendJson(res, 200, { success: true, ...adminState(engine) });
  };
  const resume: Route = ({ res }) => {
    engine.scheduler.resume();
    sendJson(res, 200, { success: true, ...adminState(engine) });
  };
  const setVersion: Route = ({ res, body }) => handleSetVersion(engine, res, body);
  const getVersion: Route = ({ res }) => sendJson(res, 200, { policy_version: engine.policyVersion, weight_version: engine.policyVersion });
  return new Map<string, Route>([
    ["GET /health", ({ res }) => sendText(res, 200, "")],
    ["GET /v1/models", ({ res }) => sendJson(res, 200, { object: "list", data: [model] })],
    ["POST /v1/chat/completions", ({ req, res, body, signal }) => handleChat(engine, req, res, body, signal)],
    ["POST /v1/completions", ({ req, res, body, signal }) => handleCompletions(engine, req, res, body, signal)],
    ["POST /tokenize", ({ res, body }) => handleTokenize(engine, res, body)],
    ["POST /detokenize", ({ res, body }) => handleDetokenize(engine, res, body)],
    ["POST /generate", ({ req, res, body, signal }) => handleGenerate(engine, req, res, body, signal)],
    ["GET /metrics", ({ req, res, url }) => handleMetrics(engine, req, res, url)],
    ["GET /admin/state", ({ res }) => sendJson(res, 200, adminState(engine))],
    ["POST /admin/pause", pause],
    ["POST /admin/resume", resume],
    ["POST /admin/policy_version", setVersion],
    ["GET /admin/policy_version", getVersion],
    ["POST /admin/weights", ({ res, body }) => handleSetWeights(engine, res, body)],
    ["GET /admin/weights", ({ res }) => sendJson(res, 200, weightsState(engine))],
    // vLLM's names (RL dev-mode endpoints).
    ["POST /pause", pause],
    ["POST /resume", resume],
    // SGLang's names for the same operations.
    ["POST /pause_generation", pause],
    ["POST /continue_generation", resume],
    ["POST /update_weight_version", setVersion],
    ["GET /get_weight_version", getVersion],
  ]);
}
