/** The route table: "METHOD /path" -> handler. */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { SimEngine } from "../engine.ts";
import { sendJson, sendText } from "../http.ts";
import { handleChat } from "./chat.ts";

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
  const models: Route = ({ res }) =>
    sendJson(res, 200, {
      object: "list",
      data: [
        {
          id: engine.opts.modelName,
          object: "model",
          created: started,
          owned_by: "vllm",
          root: engine.opts.modelName,
          parent: null,
          max_model_len: engine.opts.maxModelLen,
          permission: [],
        },
      ],
    });
  return new Map<string, Route>([
    ["GET /health", ({ res }) => sendText(res, 200, "")],
    ["GET /v1/models", models],
    ["POST /v1/chat/completions", ({ req, res, body, signal }) => handleChat(engine, req, res, body, signal)],
  ]);
}
