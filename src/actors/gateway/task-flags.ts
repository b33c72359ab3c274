/**
 * Whether a session's task still wants it run, read from the `polar_task_flags`
 * view the supervisor keeps for gateways (TaskFlags, written when a task is
 * created and whenever its status or early stop changes). The gateway never
 * reads the supervisor's task records. A read that fails is retried by the
 * caller's policy; a task with no (readable) flags is run.
 */
import type { KV } from "@nats-io/kv";
import { decode } from "../../protocol/codec.ts";
import { TaskFlags } from "../../protocol/schemas.ts";
import { taskFlagsKey } from "../../protocol/subjects.ts";

export const REFUSE_CANCELLED = "session cancelled";
export const REFUSE_EARLY_STOP = "early stop: the task already has enough usable sessions";

/** Why a session of this task must not start, or null. */
export function refusalOf(f: Pick<TaskFlags, "status" | "early_stopped_at"> | null): string | null {
  if (!f) return null;
  if (f.status === "cancelling" || f.status === "cancelled") return REFUSE_CANCELLED;
  if (f.early_stopped_at) return REFUSE_EARLY_STOP;
  return null;
}

export async function readTaskFlags(flags: KV, taskId: string): Promise<TaskFlags | null> {
  const e = await flags.get(taskFlagsKey(taskId));
  if (!e || e.operation !== "PUT" || !e.value.length) return null;
  const parsed = TaskFlags.safeParse(decode(e.value));
  return parsed.success ? parsed.data : null;
}
