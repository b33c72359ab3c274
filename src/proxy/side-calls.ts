/**
 * Side calls: model calls a harness makes besides the agent loop (title
 * generation, model routers). They are recorded like any call but marked
 * `completion_role: "side"` with a `side_kind`, so builders can leave them out.
 */
import type { ChatRequest } from "./chat-types.ts";
import { contentText } from "./normalize.ts";

const TITLE_RE = /\b(title generator|generate (a|the) (short |concise )?title|conversation title|session title|title for (this|the) conversation)\b/i;
const ROUTER_RE = /\bcomplexity[_ ]score\b|\b(model|task) rout(er|ing)\b|\brouting ai\b/i;

/** The side kind of a converted request, or undefined for a policy call. */
export function sideKind(req: ChatRequest, modelRequested: string): string | undefined {
  if (req.tools?.length) return undefined;
  const system = req.messages[0]?.role === "system" ? contentText(req.messages[0].content) : "";
  const head = system.slice(0, 4000);
  if (TITLE_RE.test(head)) return "title";
  if (ROUTER_RE.test(head) || ROUTER_RE.test(JSON.stringify(req.response_format ?? ""))) return "router";
  if (/flash-lite|router/i.test(modelRequested) && /\bjson\b/i.test(head)) return "router";
  return undefined;
}
