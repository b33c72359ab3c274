/**
 * Operations: /metrics (Prometheus text, or JSON with ?format=json or an
 * `accept: application/json` header), pause/resume of generation, and the
 * policy version stamped on every answer. SGLang's names for the same
 * operations are accepted too.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import type { SimEngine } from "../engine.ts";
import { sendJson, sendText } from "../http.ts";
import type { SimMetrics } from "../scheduler.ts";
import { parseRequest } from "./request-fields.ts";

export function handleMetrics(engine: SimEngine, req: IncomingMessage, res: ServerResponse, url: URL): void {
  const m = engine.scheduler.metrics(engine.policyVersion);
  const json = url.searchParams.get("format") === "json" || (req.headers.accept ?? "").includes("application/json");
  if (json) return sendJson(res, 200, m);
  sendText(res, 200, prometheus(m, engine.opts.modelName), "text/plain; version=0.0.4; charset=utf-8");
}

function prometheus(m: SimMetrics, model: string): string {
  const label = `{model_name=${JSON.stringify(model)}}`;
  const lines: string[] = [];
  const metric = (name: string, type: "gauge" | "counter", help: string, value: number | boolean) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name}${label} ${Number(value)}`);
  };
  metric("vllm:num_requests_running", "gauge", "Requests holding a generation slot.", m.running);
  metric("vllm:num_requests_waiting", "gauge", "Requests waiting for a slot (or for resume).", m.waiting);
  metric("vllm:prompt_tokens_total", "counter", "Prompt tokens processed.", m.promptTokensTotal);
  metric("vllm:generation_tokens_total", "counter", "Tokens generated.", m.generationTokensTotal);
  metric("polar_sim_slots", "gauge", "Generation slots.", m.slots);
  metric("polar_sim_busy_fraction", "gauge", `Busy slot fraction over the last ${m.windowSeconds.toFixed(3)} s.`, m.busyFraction);
  metric("polar_sim_queue_depth", "gauge", "Requests queued for a slot.", m.waiting);
  metric("polar_sim_tokens_per_second", "gauge", `Generated tokens per second over the last ${m.windowSeconds.toFixed(3)} s.`, m.tokensPerSecond);
  metric("polar_sim_busy_slot_seconds_total", "counter", "Slot-seconds spent generating.", m.busySlotSecondsTotal);
  metric("polar_sim_requests_total", "counter", "Generation requests received.", m.requestsTotal);
  metric("polar_sim_requests_rejected_total", "counter", "Requests rejected because the queue was full.", m.requestsRejected);
  metric("polar_sim_max_running", "gauge", "Most requests ever running at once.", m.maxRunning);
  metric("polar_sim_paused", "gauge", "1 while generation is paused.", m.paused);
  lines.push(`# HELP polar_sim_policy_version_info The policy version stamped on answers.`, `# TYPE polar_sim_policy_version_info gauge`);
  lines.push(`polar_sim_policy_version_info{model_name=${JSON.stringify(model)},version=${JSON.stringify(m.policyVersion)}} 1`);
  return lines.join("\n") + "\n";
}

const VersionSchema = z.looseObject({ version: z.string().min(1).nullish(), new_version: z.string().min(1).nullish() });

export function handleSetVersion(engine: SimEngine, res: ServerResponse, body: unknown): void {
  const req = parseRequest(VersionSchema, body);
  const v = req.version ?? req.new_version;
  if (!v) return sendJson(res, 400, { error: { message: "version is required", type: "BadRequestError", param: "version", code: 400 } });
  engine.policyVersion = v;
  sendJson(res, 200, { success: true, policy_version: v, message: `policy version set to ${v}` });
}

export function adminState(engine: SimEngine) {
  const m = engine.scheduler.metrics(engine.policyVersion);
  return { paused: m.paused, policy_version: engine.policyVersion, running: m.running, waiting: m.waiting };
}

const WeightsSchema = z.looseObject({
  weights: z.record(z.string(), z.unknown()),
  /** The new policy version; by default the current one plus 1 (when it is an integer). */
  version: z.union([z.string().min(1), z.number().int().min(0)]).nullish(),
});

/**
 * POST /admin/weights `{weights: {"<rule>/<step>": [logits…]}, version?}`:
 * replaces the learnable policy's logits at once and bumps the policy
 * version; later samples use the new logits. All-or-nothing: one bad entry
 * refuses the whole update (400 naming it).
 */
export function handleSetWeights(engine: SimEngine, res: ServerResponse, body: unknown): void {
  const req = parseRequest(WeightsSchema, body);
  const problems = engine.weights.set(req.weights);
  if (problems.length) return sendJson(res, 400, { error: { message: problems.join("; "), type: "BadRequestError", param: "weights", code: 400 } });
  const cur = Number(engine.policyVersion);
  engine.policyVersion = req.version != null ? String(req.version) : Number.isInteger(cur) ? String(cur + 1) : `${engine.policyVersion}+1`;
  sendJson(res, 200, { success: true, policy_version: engine.policyVersion, weights: engine.weights.snapshot() });
}

export function weightsState(engine: SimEngine) {
  return {
    policy_version: engine.policyVersion,
    points: engine.weights.points.map((p) => ({ ...p, logits: engine.weights.logits(p.key), log_probs: engine.weights.logProbs(p.key) })),
  };
}
