/**
 * POSTRUN's side of evaluator actors: publish an EvalRequest on the pool's
 * `POLAR_EVALS` work queue and wait for the EvalReply of this attempt on
 * `polar.eval.result.<session_id>` (a stream: a reply published before we
 * listen is still found). The wait is bounded by the request's deadline (the
 * session budget) and by the session's signal.
 */
import type { MsgHdrs } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { publishDurable, readDurable } from "../../nats/messages.ts";
import type { Infra } from "../../nats/infra.ts";
import { validate } from "../../protocol/codec.ts";
import { errorMessage, PolarError } from "../../protocol/errors.ts";
import {
  EvalReply,
  RuntimeSpec,
  type AgentRunResult,
  type EvalRequest,
  type EvalResult,
  type EvaluatorSpec,
  type SessionTiming,
  type TrajectoryStatus,
} from "../../protocol/schemas.ts";
import { STREAMS, SUBJECTS } from "../../protocol/subjects.ts";
import type { Evaluator } from "../../evaluators/types.ts";
import type { Runtime } from "../../runtimes/types.ts";
import { whenAborted } from "../../util/abort.ts";
import { evaluateInProcess, type Evaluate } from "./evaluation.ts";
import type { GatewayContext } from "./context.ts";

export interface RemoteEvaluator {
  evaluate(req: EvalRequest, signal: AbortSignal): Promise<EvalReply>;
}

export function remoteEvaluator(infra: Infra, pool: string, log: Logger, now: () => number = Date.now): RemoteEvaluator {
  /** The reply of this attempt, from a message body, or undefined (another attempt's, or malformed). */
  const decodeReply = async (req: EvalRequest, data: Uint8Array, headers?: MsgHdrs): Promise<EvalReply | undefined> => {
    try {
      const reply = validate(EvalReply, await readDurable(infra, data, headers), "evaluation reply");
      return reply.attempt === req.attempt ? reply : undefined; // else an earlier attempt's evaluation
    } catch (err) {
      log.warn({ err: errorMessage(err), session_id: req.session_id }, "ignoring a malformed evaluation reply");
      return undefined;
    }
  };
  /** The reply already stored on the stream (published while we were not listening), if any. */
  const stored = async (req: EvalRequest, subject: string): Promise<EvalReply | undefined> => {
    const m = await infra.jsm.streams.getMessage(STREAMS.evalResults, { last_by_subj: subject }).catch(() => null);
    return m ? decodeReply(req, m.data, m.header) : undefined;
  };
  return {
    async evaluate(req, signal) {
      const subject = SUBJECTS.evalResult(req.session_id);
      // Listen first, then publish: a reply is seen live; the stream is read too, for one sent while not listening.
      const sub = infra.nc.subscribe(subject);
      try {
        await publishDurable(infra, SUBJECTS.evalRequest(pool), req, `${req.session_id}:${req.attempt}`);
        const deadline = Date.parse(req.deadline_at);
        const it = sub[Symbol.asyncIterator]();
        let reply = await stored(req, subject);
        // One pending read at a time: a second `next()` would take (and lose) the message the first waits for.
        let pending: ReturnType<typeof it.next> | undefined;
        while (!reply) {
          if (signal.aborted) throw signal.reason;
          const left = deadline - now();
          if (left <= 0) {
            throw new PolarError("timeout", `no evaluator answered within the session budget (pool ${pool}: is an evaluator running?)`);
          }
          const aborted = whenAborted(signal);
          let timer: NodeJS.Timeout | undefined;
          const tick = new Promise<"tick">((r) => (timer = setTimeout(() => r("tick"), Math.min(left, 5000))));
          pending ??= it.next();
          const next = await Promise.race([pending, tick, aborted.promise]).finally(() => {
            aborted.dispose();
            clearTimeout(timer);
          });
          if (next !== "tick") pending = undefined;
          // On a tick (or a lost connection) look at the stream: the live message may have been missed.
          reply = next === "tick" || next.done ? await stored(req, subject) : await decodeReply(req, next.value.data, next.value.headers);
        }
        await infra.jsm.streams.purge(STREAMS.evalResults, { filter: subject }).catch((err) => {
          log.debug({ err: errorMessage(err) }, "evaluation reply not purged (it expires with the stream's max age)");
        });
        return reply;
      } finally {
        sub.unsubscribe();
      }
    },
  };
}

export type WhileWaiting = <T>(p: Promise<T>) => Promise<T>;

/**
 * The POSTRUN evaluation call of a gateway with evaluator actors: an evaluator
 * that is remote-capable, asked for a fresh runtime (`refresh_runtime`), goes
 * to the pool's evaluators (the POSTRUN worker released while it waits, via
 * `whileWaiting`); any other runs in process.
 */
export function evaluateWithActors(whileWaiting?: WhileWaiting): Evaluate {
  return async (g, r) => {
    if (!routesToActors(g, r.spec) || !g.remoteEval) return evaluateInProcess(g, r);
    const evaluator = g.registries.evaluators.resolve(r.spec, {});
    return evaluateRemotely({
      evaluator,
      spec: r.spec,
      remote: g.remoteEval,
      runtime: r.runtime,
      runtimeSpec: RuntimeSpec.parse(r.dispatch.runtime ?? g.defaultRuntime),
      sessionId: r.dispatch.session_id,
      taskId: r.dispatch.task_id,
      attempt: r.attempt,
      nodeId: g.nodeId,
      trajectoryStatus: r.trajectory.status,
      agentResult: r.agent,
      signal: r.signal,
      remainingMs: r.timeoutMs,
      timing: r.timing,
      release: r.release,
      whileWaiting,
    });
  };
}

/** Whether this evaluation goes to evaluator actors: a remote-capable evaluator asked for a fresh runtime. */
export function routesToActors(g: GatewayContext, spec: EvaluatorSpec): boolean {
  if (!spec.refresh_runtime || !g.remoteEval) return false;
  try {
    return g.registries.evaluators.resolve(spec, {}).remote === true;
  } catch {
    return false; // an unknown evaluator fails in process, with its own error
  }
}

export interface RemoteEvaluation {
  evaluator: Evaluator;
  spec: EvaluatorSpec;
  remote: RemoteEvaluator;
  /** The agent's runtime, for `collect` (what the evaluator takes from it). */
  runtime?: Runtime;
  runtimeSpec: RuntimeSpec;
  sessionId: string;
  taskId: string;
  attempt: number;
  nodeId: string;
  trajectoryStatus: TrajectoryStatus;
  agentResult: AgentRunResult | null;
  signal: AbortSignal;
  /** Milliseconds of session budget left. */
  remainingMs: number;
  /** Receives the eval timing fields. */
  timing: Partial<SessionTiming>;
  /** Runs the wait with the POSTRUN worker released (the gateway's hook), or just awaits. */
  whileWaiting?: WhileWaiting;
  /** Releases the agent's runtime once collected from (nothing else needs it). */
  release?: () => Promise<void>;
  now?: () => number;
}

/** Collects from the agent's runtime, then evaluates on an evaluator actor; throws PolarError on failure. */
export async function evaluateRemotely(r: RemoteEvaluation): Promise<EvalResult> {
  const now = r.now ?? Date.now;
  const deadline = now() + r.remainingMs;
  let collected: unknown = null;
  if (r.evaluator.collect) {
    if (!r.runtime) throw new PolarError("evaluator", `${r.spec.strategy}: the agent's runtime is gone before its output could be collected`);
    collected = await r.evaluator.collect({ runtime: r.runtime, env: r.spec.env, signal: r.signal, timeoutMs: Math.max(1, r.remainingMs) });
    await r.release?.();
  }
  const req: EvalRequest = {
    session_id: r.sessionId,
    task_id: r.taskId,
    attempt: r.attempt,
    node_id: r.nodeId,
    evaluator: r.spec,
    runtime: r.runtimeSpec,
    collected,
    trajectory_status: r.trajectoryStatus,
    agent_result: r.agentResult,
    deadline_at: new Date(deadline).toISOString(),
    created_at: new Date(now()).toISOString(),
  };
  const w = performance.now();
  const waiting = r.remote.evaluate(req, r.signal);
  try {
    const reply = await (r.whileWaiting ? r.whileWaiting(waiting) : waiting);
    r.timing.eval_container_start_ms = r.timing.eval_runtime_validation_ms = reply.timing.eval_container_start_ms;
    r.timing.eval_prepare_ms = reply.timing.eval_prepare_ms;
    if (reply.error) {
      const code = reply.error.code === "timeout" ? "timeout" : reply.error.code === "cancelled" ? "cancelled" : "evaluator";
      throw new PolarError(code, `${reply.error.message} (evaluator ${reply.evaluator_node_id})`);
    }
    const result = reply.result;
    if (!result) throw new PolarError("evaluator", `evaluator ${reply.evaluator_node_id} answered with neither a result nor an error`);
    return { ...result, metadata: { ...result.metadata, evaluator_node_id: reply.evaluator_node_id, evaluator_delivery_count: reply.delivery_count } };
  } finally {
    r.timing.eval_wait_ms = performance.now() - w;
  }
}
