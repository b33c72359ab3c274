/**
 * One evaluation request on an evaluator actor: check the budget, start a
 * fresh runtime when the evaluator needs one, evaluate, tear down, and
 * answer with an EvalReply. Never throws for the request's own failures:
 * they become the reply's `error`. It throws only when the actor is
 * stopping (the request then goes back to the queue).
 */
import { randomBytes } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import type { GatewayRegistries } from "../gateway/context.ts";
import { startFreshRuntime } from "../../evaluators/fresh-runtime.ts";
import { errorMessage, PolarError, toWireError } from "../../protocol/errors.ts";
import { EvalTiming, type EvalReply, type EvalRequest, type EvalResult } from "../../protocol/schemas.ts";
import type { Runtime } from "../../runtimes/types.ts";

export interface HandleContext {
  nodeId: string;
  registries: GatewayRegistries;
  workRoot: string;
  toolsDir?: string;
  log: Logger;
  now(): number;
}

/** Evaluates one request; `stop` aborts when the actor leaves (then this rejects with its reason). */
export async function handleEvalRequest(h: HandleContext, req: EvalRequest, deliveryCount: number, stop: AbortSignal, publishedAt: number): Promise<EvalReply> {
  const timing = EvalTiming.parse({ eval_queue_ms: Math.max(0, h.now() - publishedAt) });
  const reply = (result: EvalResult | null, error: EvalReply["error"]): EvalReply => ({
    session_id: req.session_id,
    task_id: req.task_id,
    attempt: req.attempt,
    evaluator_node_id: h.nodeId,
    delivery_count: deliveryCount,
    result,
    error,
    timing,
    finished_at: new Date(h.now()).toISOString(),
  });
  const leftMs = Date.parse(req.deadline_at) - h.now();
  if (leftMs <= 0) return reply(null, { code: "timeout", message: "the session budget ran out before evaluation started", retryable: false });
  const log = h.log.child({ session_id: req.session_id, attempt: req.attempt, delivery: deliveryCount });
  const budget = AbortSignal.timeout(leftMs);
  const signal = AbortSignal.any([stop, budget]);
  const dir = join(h.workRoot, `${req.session_id}.a${req.attempt}.eval`);
  let runtime: Runtime | undefined;
  const t0 = performance.now();
  try {
    const evaluator = h.registries.evaluators.resolve(req.evaluator, {});
    if (evaluator.remote) {
      await mkdir(dir, { recursive: true });
      const fresh = await startFreshRuntime(
        h.registries.runtimes,
        req.runtime,
        {
          // Unique per delivery: a dead evaluator's container may still hold the name.
          sessionId: `ev${randomBytes(3).toString("hex")}-${req.session_id}`,
          gatewayId: h.nodeId,
          // Evaluation never calls the model; the runtime gets no proxy socket.
          proxy: { url: "http://127.0.0.1:9" },
          sessionDir: dir,
          toolsDir: h.toolsDir,
          log,
        },
        { signal, log },
      );
      runtime = fresh.runtime;
      timing.eval_container_start_ms = fresh.startMs;
      timing.eval_prepare_ms = fresh.prepareMs;
    }
    const result = await raceSignal(
      evaluator.evaluate({
        trajectory: { status: req.trajectory_status, metadata: {}, traces: [], error: null },
        sessionId: req.session_id,
        taskId: req.task_id,
        agentResult: req.agent_result,
        evalRuntime: runtime,
        collected: req.collected ?? undefined,
        runtimeSpec: req.runtime,
        env: req.evaluator.env,
        signal,
        timeoutMs: Math.max(1, Date.parse(req.deadline_at) - h.now()),
      }),
      signal,
    );
    return reply(result, null);
  } catch (err) {
    if (stop.aborted) throw stop.reason;
    const e = budget.aborted ? new PolarError("timeout", "evaluation exceeded the session budget") : err;
    log.warn({ err: errorMessage(e) }, "evaluation failed");
    const w = toWireError(e);
    return reply(null, { code: w.code, message: w.message.slice(0, 16_000), retryable: w.retryable });
  } finally {
    timing.eval_ms = performance.now() - t0;
    if (runtime) {
      const s = performance.now();
      await (stop.aborted || budget.aborted ? runtime.cancel() : runtime.stop()).catch((err) => log.warn({ err }, "eval runtime stop failed"));
      timing.eval_runtime_stop_ms = performance.now() - s;
    }
    await rm(dir, { recursive: true, force: true }).catch((err) => log.debug({ err }, "eval session dir not removed"));
  }
}

function raceSignal<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([p, aborted]).finally(() => signal.removeEventListener("abort", onAbort));
}
