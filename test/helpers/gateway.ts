/** Waiting with deadlines for the gateway tests (conditions, never fixed sleeps). */
import { request } from "../../src/nats/messages.ts";
import type { TaskStatus } from "../../src/protocol/schemas.ts";
import { SUBJECTS } from "../../src/protocol/subjects.ts";
import type { TestSystem } from "./system.ts";

/** Polls `probe` until it returns a value other than undefined/false; throws naming `what` after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 20_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export function taskStatus(sys: TestSystem, taskId: string): Promise<TaskStatus> {
  return request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: taskId, with_results: true });
}

/** Waits until the task is completed, failed or cancelled. */
export function waitTaskDone(sys: TestSystem, taskId: string, timeoutMs = 30_000): Promise<TaskStatus> {
  return waitFor(
    `task ${taskId} to finish`,
    async () => {
      const st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: taskId, with_results: true }).catch(() => undefined);
      return st && ["completed", "failed", "cancelled"].includes(st.status) ? st : undefined;
    },
    timeoutMs,
    100,
  );
}

export function shellTask(task_id: string, command: string, extra: Record<string, unknown> = {}) {
  return {
    task_id,
    instruction: "hello",
    num_samples: 1,
    timeout_seconds: 60,
    runtime: { backend: "local" },
    agent: { harness: "shell", custom_shell: { command } },
    ...extra,
  };
}

/** One model call through the proxy with curl (starts in milliseconds). */
export const ONE_CALL = `curl -sf -o /dev/null -H "authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json' -d '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":8}' "$OPENAI_BASE_URL/chat/completions"`;
