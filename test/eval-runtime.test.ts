/**
 * Fresh evaluation runtimes (refresh_runtime) over the real system with the
 * local backend: warmed up while the agent runs, timed, fresh (none of the
 * agent's files), bounded by the session budget.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import type { TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const CLIENT = join(fileURLToPath(new URL("..", import.meta.url)), "config/examples/chat-client.mjs");

function task(task_id: string, extra: Record<string, unknown> = {}) {
  return {
    task_id,
    instruction: "hello",
    num_samples: 1,
    timeout_seconds: 30,
    runtime: { backend: "local", prepare: [{ type: "exec", command: "echo agent-side > prepared.txt" }], eval_prepare: [{ type: "exec", command: "echo eval-side > prepared.txt" }] },
    agent: { harness: "shell", custom_shell: { command: `TURNS=1 node ${JSON.stringify(CLIENT)} >/dev/null && echo from-agent > agent.txt` } },
    evaluator: { strategy: "session_completed", refresh_runtime: true },
    ...extra,
  };
}

async function waitDone(sys: TestSystem, taskId: string, ms = 30_000): Promise<TaskStatus> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: taskId, with_results: true });
    if (["completed", "failed", "cancelled"].includes(st.status)) return st;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`task ${taskId} did not finish`);
}

describe("fresh evaluation runtimes", () => {
  let sys: TestSystem;
  let workRoot: string;
  /** A file of the session's agent workspace, or of its fresh evaluation runtime's (session folders are kept). */
  const file = (sessionId: string, side: "agent" | "eval", name: string) => {
    const p = join(workRoot, `${sessionId}.a1`, ...(side === "eval" ? ["eval"] : []), "workspace", name);
    return existsSync(p) ? readFileSync(p, "utf8") : null;
  };
  beforeAll(async () => {
    workRoot = await mkdtemp(join(tmpdir(), "polar-eval-rt-"));
    sys = await startTestSystem();
    await sys.startSupervisor();
    await sys.startGateway({ nodeId: "gw-eval-rt", workRoot, keepSessionDirs: true });
  });
  afterAll(async () => {
    await sys?.stop();
    if (workRoot) await rm(workRoot, { recursive: true, force: true });
  });

  it("starts and prepares (eval_prepare) the fresh runtime while the agent runs; the eval timing is filled", async () => {
    await request(sys.client, SUBJECTS.api.submit, task("warm"));
    const r = (await waitDone(sys, "warm")).results[0]!;
    expect(r.status, `${r.error}`).toBe("COMPLETED");
    expect(r.trajectory.metadata.evaluation).toMatchObject({ strategy: "session_completed", outcome_reward: 1 });
    expect(r.timing.eval_container_start_ms).toBeGreaterThan(0);
    expect(r.timing.eval_runtime_validation_ms).toBe(r.timing.eval_container_start_ms);
    expect(r.timing.eval_prepare_ms).toBeGreaterThan(0);
    // The fresh runtime is another sandbox: eval_prepare's file, none of the agent's.
    expect(file(r.session_id, "eval", "prepared.txt")).toBe("eval-side\n");
    expect(file(r.session_id, "eval", "agent.txt")).toBeNull();
    expect(file(r.session_id, "agent", "prepared.txt")).toBe("agent-side\n");
    expect(file(r.session_id, "agent", "agent.txt")).toBe("from-agent\n");
  });

  it("an evaluator without collect (test_on_output) still checks the agent's runtime, kept up beside the fresh one", async () => {
    // test_on_output checks in the agent's runtime; what it finds proves which runtime is which.
    const evaluator = { strategy: "test_on_output", refresh_runtime: true, config: { command: "cat agent.txt prepared.txt" } };
    await request(sys.client, SUBJECTS.api.submit, task("both", { evaluator }));
    const r = (await waitDone(sys, "both")).results[0]!;
    expect(r.status).toBe("COMPLETED");
    expect((r.trajectory.metadata.evaluation as Record<string, unknown>).stdout_tail).toBe("from-agent\nagent-side\n");
  });

  it("a failing eval_prepare fails the evaluation and names it; a null eval_prepare reuses prepare", async () => {
    const runtime = { backend: "local", prepare: [{ type: "exec", command: "true" }], eval_prepare: [{ type: "exec", command: "echo broken >&2; exit 4" }] };
    await request(sys.client, SUBJECTS.api.submit, task("bad-eval-prep", { runtime }));
    const r = (await waitDone(sys, "bad-eval-prep")).results[0]!;
    expect(r.status).toBe("ERROR");
    expect(r.error).toMatch(/^evaluator failed: evaluation runtime failed: runtime\.eval_prepare failed in the evaluation runtime: .*broken/);

    const reuse = { backend: "local", prepare: [{ type: "exec", command: "echo from-prepare > prepared.txt" }], eval_prepare: null };
    await request(sys.client, SUBJECTS.api.submit, task("null-eval-prep", { runtime: reuse }));
    const n = (await waitDone(sys, "null-eval-prep")).results[0]!;
    expect(n.status).toBe("COMPLETED");
    expect(file(n.session_id, "eval", "prepared.txt")).toBe("from-prepare\n");
  });

  it("the session budget bounds the wait for a fresh runtime that is still preparing: TIMEOUT, and nothing hangs", async () => {
    const runtime = { backend: "local", eval_prepare: [{ type: "exec", command: "sleep 60" }] };
    const t0 = Date.now();
    await request(sys.client, SUBJECTS.api.submit, task("slow-eval-prep", { runtime, timeout_seconds: 10 }));
    const r = (await waitDone(sys, "slow-eval-prep")).results[0]!;
    expect(Date.now() - t0).toBeLessThan(30_000);
    expect(r.status).toBe("TIMEOUT");
    expect(r.error).toMatch(/^eval timed out: .*exceeded the session budget/);
  });
});
