/** SWE-bench / SWE-Gym instances from JSONL, and the task each becomes. */
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { ValidationError } from "../protocol/errors.ts";

export const Instance = z
  .object({
    instance_id: z.string().min(1).max(256),
    repo: z.string().min(1).max(256),
    base_commit: z.string().min(1).max(64),
    problem_statement: z.string().max(1_000_000),
    test_patch: z.string(),
    FAIL_TO_PASS: z.union([z.string(), z.array(z.string())]),
    PASS_TO_PASS: z.union([z.string(), z.array(z.string())]),
    /** Extension: the Docker image of this instance (default: SWE-bench's naming, see `imageOf`). */
    image: z.string().min(1).optional(),
  })
  .passthrough();
export type Instance = z.infer<typeof Instance>;

/** Reads every instance; a malformed line is an error naming its line and field. */
export async function readInstances(path: string): Promise<Instance[]> {
  const text = await readFile(path, "utf8").catch((err) => {
    throw new ValidationError("instances", [{ path, message: `cannot read: ${(err as Error).message}` }]);
  });
  const out: Instance[] = [];
  const seen = new Set<string>();
  const issues: Array<{ path: string; message: string }> = [];
  text.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      return void issues.push({ path: `line ${i + 1}`, message: "not valid JSON" });
    }
    const r = Instance.safeParse(raw);
    if (!r.success) return void issues.push(...r.error.issues.map((x) => ({ path: `line ${i + 1}: ${x.path.join(".")}`, message: x.message })));
    if (seen.has(r.data.instance_id)) return void issues.push({ path: `line ${i + 1}: instance_id`, message: `duplicate ${r.data.instance_id}` });
    seen.add(r.data.instance_id);
    out.push(r.data);
  });
  if (issues.length) throw new ValidationError(`instances ${path}`, issues);
  return out;
}

/** `{instance_id}` and `{id_1776}` (SWE-bench's image naming: `__` becomes `_1776_`) in a template. */
export function imageOf(inst: Instance, template: string): string {
  return inst.image ?? template.replaceAll("{instance_id}", inst.instance_id).replaceAll("{id_1776}", inst.instance_id.replaceAll("__", "_1776_").toLowerCase());
}

/** A task id for an instance: the run's prefix and the id, reduced to the id alphabet. */
export function taskIdOf(prefix: string, inst: Instance): string {
  return `${prefix}-${inst.instance_id.replace(/[^A-Za-z0-9_.-]/g, "_")}`.slice(0, 128);
}

export interface TaskShape {
  harness: string;
  samples: number;
  imageTemplate: string;
  /** A partial task (agent settings, runtime prepare, timeout, builder...) every instance's task starts from. */
  template: Record<string, unknown>;
}

export function taskOf(taskId: string, inst: Instance, s: TaskShape): Record<string, unknown> {
  const t = s.template as { runtime?: Record<string, unknown>; agent?: Record<string, unknown>; evaluator?: { config?: Record<string, unknown> } };
  const { image: _, ...instance } = inst;
  return {
    timeout_seconds: 1800,
    builder: { strategy: "per_request" },
    ...s.template,
    task_id: taskId,
    instruction: inst.problem_statement,
    num_samples: s.samples,
    runtime: { backend: "docker", workdir: "/testbed", network: "none", ...t.runtime, image: imageOf(inst, s.imageTemplate) },
    agent: { ...t.agent, harness: s.harness },
    evaluator: { strategy: "swebench_harness", refresh_runtime: true, config: { ...t.evaluator?.config, instance } },
    metadata: { datagen_instance_id: inst.instance_id, repo: inst.repo },
  };
}
