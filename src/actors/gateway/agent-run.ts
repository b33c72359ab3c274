/**
 * The effects of an agent run: INIT (resolve and start the runtime, run the
 * task's prepare commands) and RUN (harness setup, then its steps, each
 * bounded by what is left of the session and agent budgets). Model calls go
 * through the proxy with the attempt's credential and are captured there.
 * Failures are thrown; SessionAttempt turns them into the result.
 */
import { redact } from "../../security/redact.ts";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { PolarError } from "../../protocol/errors.ts";
import { RuntimeSpec, type AgentRunResult, type SessionDispatch } from "../../protocol/schemas.ts";
import type { Harness, HarnessContext } from "../../harnesses/types.ts";
import { proxyEnv } from "../../harnesses/env.ts";
import { runPrepare } from "../../runtimes/prepare.ts";
import type { Runtime } from "../../runtimes/types.ts";
import { budgeted, stepBudget, type Clock } from "./budget.ts";
import type { GatewayContext } from "./context.ts";
import type { Marks } from "./decide.ts";

const LOG_TAIL = 4000;

/** What the agent run of one attempt needs from its session. */
export interface RunScope {
  g: GatewayContext;
  dispatch: SessionDispatch;
  attempt: number;
  log: Logger;
  signal: AbortSignal;
  clock: Clock;
  mark(name: keyof Marks): void;
  /** What is left of the session budget (ms). */
  sessionLeftMs(): number;
  /** Why the attempt was cancelled, when it was. */
  cancelReason(): string | undefined;
}

/** The host directory of one attempt (logs, runtime files). */
export function attemptDir(g: GatewayContext, sessionId: string, attempt: number): string {
  return join(g.workRoot, `${sessionId}.a${attempt}`);
}

export function runtimeSpec(s: RunScope): RuntimeSpec {
  return RuntimeSpec.parse(s.dispatch.runtime ?? s.g.defaultRuntime);
}

/** INIT: resolves the runtime (handed to `onRuntime` at once, so a cancel can reach it), starts it, prepares it. */
export async function initRuntime(s: RunScope, onRuntime: (r: Runtime) => void): Promise<Runtime> {
  const spec = runtimeSpec(s);
  const sessionDir = attemptDir(s.g, s.dispatch.session_id, s.attempt);
  await mkdir(join(sessionDir, "logs", "agent"), { recursive: true });
  const proxy = await s.g.bindings.open(s.dispatch.session_id, s.attempt);
  const runtime = s.g.registries.runtimes.resolve(
    { strategy: spec.backend, config: {} },
    { spec, ctx: { sessionId: s.dispatch.session_id, gatewayId: s.g.nodeId, proxy, sessionDir, toolsDir: s.g.toolsDir, log: s.log } },
  );
  s.g.bindings.bind(s.dispatch.session_id, s.attempt, runtime);
  onRuntime(runtime);
  s.mark("runtimeStart");
  await budgeted(runtime.start(), s.sessionLeftMs(), "runtime start", s.signal);
  s.mark("runtimeStarted");
  await budgeted(runPrepare(runtime, spec.prepare, { signal: s.signal, log: s.log, uploadRoots: s.g.uploadRoots }), s.sessionLeftMs(), "prepare", s.signal);
  s.mark("prepared");
  return runtime;
}

/** RUN: harness setup and steps. Resolves with the agent's result (completed, failed or timeout). */
export async function runHarness(s: RunScope, runtime: Runtime, credential: string): Promise<AgentRunResult> {
  const runStart = s.clock();
  const agentTimeout = s.dispatch.metadata.agent_timeout as number | undefined;
  const agentDeadline = agentTimeout ? runStart + agentTimeout * 1000 : Infinity;
  const harness = s.g.registries.harnesses.resolve(
    { strategy: s.dispatch.agent.harness ?? "", config: s.dispatch.agent.settings },
    { agent: s.dispatch.agent },
  );
  const ctx = harnessContext(s, runtime, credential);
  s.mark("setupStart");
  await budgeted(harness.setup(ctx), Math.min(s.sessionLeftMs(), agentDeadline - s.clock()), "agent setup", s.signal);
  s.mark("setupDone");
  const result = await runSteps(s, harness, ctx, agentDeadline);
  s.mark("execDone");
  return result;
}

function harnessContext(s: RunScope, runtime: Runtime, credential: string): HarnessContext {
  const d = s.dispatch;
  const env = {
    ...proxyEnv({ proxyUrl: runtime.proxyUrl, credential, sessionId: d.session_id, taskId: d.task_id }),
    POLAR_SAMPLE_INDEX: String(d.sample_index),
    ...(runtimeSpec(s).env ?? {}),
    ...d.agent.env,
    ...s.g.secretEnv,
  };
  return { runtime, proxyUrl: runtime.proxyUrl, credential, sessionId: d.session_id, taskId: d.task_id, env, uploadRoots: s.g.uploadRoots };
}

async function runSteps(s: RunScope, harness: Harness, ctx: HarnessContext, agentDeadline: number): Promise<AgentRunResult> {
  const steps = harness.steps(s.dispatch.instruction, ctx);
  const started = s.clock();
  for (const [i, step] of steps.entries()) {
    const budget = stepBudget(s.sessionLeftMs(), agentDeadline - s.clock());
    const r = await ctx.runtime.exec(step.command, {
      cwd: step.cwd,
      env: { ...ctx.env, ...step.env },
      timeoutMs: budget.timeoutMs,
      signal: s.signal,
      category: "agent",
    });
    // What the agent printed is kept (step logs, tails in the result): without secrets or its own credential.
    const stdout = redact(r.stdout, [ctx.credential]);
    const stderr = redact(r.stderr, [ctx.credential]);
    await writeStepLogs(s, i, stdout, stderr);
    const meta = { step: i, stdout_tail: stdout.slice(-LOG_TAIL), stderr_tail: stderr.slice(-LOG_TAIL), duration_ms: s.clock() - started };
    if (r.cancelled || s.signal.aborted) throw new PolarError("cancelled", s.cancelReason() ?? "session cancelled");
    if (r.timedOut) {
      return {
        status: "timeout",
        return_code: -1,
        error: `step ${i} timed out (${budget.source} budget)`,
        metadata: { ...meta, timeout_source: budget.source, timeout_stage: "exec" },
      };
    }
    if (r.exitCode !== 0) return { status: "failed", return_code: r.exitCode, error: `step ${i} exited with code ${r.exitCode}`, metadata: meta };
    if (i === steps.length - 1) return { status: "completed", return_code: 0, error: null, metadata: meta };
  }
  return { status: "completed", return_code: 0, error: null, metadata: { duration_ms: 0 } };
}

async function writeStepLogs(s: RunScope, i: number, stdout: string, stderr: string): Promise<void> {
  const dir = join(attemptDir(s.g, s.dispatch.session_id, s.attempt), "logs", "agent");
  const n = String(i).padStart(2, "0");
  // Step logs are a debugging aid; the tails travel in the result, so a full disk must not fail the session.
  const warn = (err: unknown) => s.log.warn({ err }, "could not write a step log");
  await writeFile(join(dir, `step.${n}.stdout.log`), stdout).catch(warn);
  await writeFile(join(dir, `step.${n}.stderr.log`), stderr).catch(warn);
}
