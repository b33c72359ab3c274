/**
 * `polar datagen`: offline SFT data generation. Each instance becomes a task
 * (swebench_harness in a fresh runtime, the instance's image); at most
 * `concurrency` tasks are in flight. Every finished session is appended to
 * `accepted.jsonl` (reward ≥ min_reward) or `rejected.jsonl`; an instance is
 * recorded as done in `state.json` only after its lines are written, so a
 * restart neither loses nor repeats an instance (lines already written for a
 * session are not written twice), and re-attaches to tasks it had submitted.
 */
import { appendFile, mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { PolarClient } from "../client/client.ts";
import type { TaskHandle } from "../client/handle.ts";
import { errorMessage, PolarError } from "../protocol/errors.ts";
import { taskIdOf, taskOf, type Instance, type TaskShape } from "./instances.ts";
import { Progress } from "./progress.ts";
import { writeReport } from "./report.ts";
import { sftLine } from "./sft.ts";
import { loadState, saveState, type DatagenState } from "./state.ts";
import type { SessionResult } from "../protocol/schemas.ts";

export interface DatagenOptions extends TaskShape {
  out: string;
  minReward: number;
  concurrency: number;
  signal?: AbortSignal;
  /** Where progress goes (a TTY gets a redrawn bar). */
  stream: NodeJS.WriteStream | NodeJS.WritableStream;
  progressIntervalMs?: number;
}

export interface DatagenSummary {
  table: string;
  state: DatagenState;
  /** Instances finished by this run (not before a restart). */
  finishedNow: number;
}

async function writtenSessions(dir: string): Promise<Set<string>> {
  const ids = new Set<string>();
  for (const f of ["accepted.jsonl", "rejected.jsonl"]) {
    const text = await readFile(join(dir, f), "utf8").catch(() => "");
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      try {
        ids.add((JSON.parse(line) as { session_id: string }).session_id);
      } catch {
        // A line cut short by a crash: its session is written again below.
      }
    }
  }
  return ids;
}

export async function runDatagen(client: PolarClient, instances: Instance[], o: DatagenOptions): Promise<DatagenSummary> {
  await mkdir(o.out, { recursive: true });
  const state = await loadState(o.out);
  const written = await writtenSessions(o.out);
  const todo = instances.filter((i) => !state.done[i.instance_id]);
  const progress = new Progress(o.stream, instances.length, state, o.progressIntervalMs ?? 10_000);
  let saving = Promise.resolve();
  const save = () => (saving = saving.then(() => saveState(o.out, state)));
  let finishedNow = 0;

  const one = async (inst: Instance) => {
    const taskId = state.submitted[inst.instance_id] ?? taskIdOf(state.prefix, inst);
    let handle: TaskHandle | undefined;
    if (state.submitted[inst.instance_id]) handle = await client.task(taskId).catch((err) => (err instanceof PolarError && err.code === "not_found" ? undefined : Promise.reject(err)));
    if (!handle) {
      handle = await client.submit(taskOf(taskId, inst, o));
      state.submitted[inst.instance_id] = taskId;
      await save();
    }
    // Every SessionResult of this run as it lands (status polls do not carry results).
    const results: SessionResult[] = [];
    for await (const r of handle.results({ signal: o.signal })) results.push(r);
    let accepted = 0;
    const lines = { accepted: "", rejected: "" };
    for (const r of results) {
      const line = sftLine(r, inst, o.minReward);
      if (line.accepted) accepted++;
      if (written.has(r.session_id)) continue;
      lines[line.accepted ? "accepted" : "rejected"] += `${JSON.stringify(line)}\n`;
      written.add(r.session_id);
    }
    if (lines.accepted) await appendFile(join(o.out, "accepted.jsonl"), lines.accepted);
    if (lines.rejected) await appendFile(join(o.out, "rejected.jsonl"), lines.rejected);
    state.done[inst.instance_id] = { task_id: taskId, repo: inst.repo, sessions: results.length, accepted };
    delete state.submitted[inst.instance_id];
    await save();
    finishedNow++;
    progress.finished();
  };

  // A bounded pool: `concurrency` instances in flight, the next starting as one finishes.
  const queue = [...todo];
  const failures: string[] = [];
  const worker = async () => {
    for (let inst = queue.shift(); inst; inst = queue.shift()) {
      if (o.signal?.aborted) return;
      try {
        await one(inst);
      } catch (err) {
        if (o.signal?.aborted) return;
        failures.push(`${inst.instance_id}: ${errorMessage(err)}`);
        progress.note(`instance ${inst.instance_id} failed: ${errorMessage(err)}`);
      }
    }
  };
  progress.start();
  try {
    await Promise.all(Array.from({ length: Math.max(1, o.concurrency) }, worker));
  } finally {
    progress.stop();
    await saving;
  }
  o.signal?.throwIfAborted();
  const table = await writeReport(o.out, state);
  if (failures.length) throw new PolarError("internal", `${failures.length} instance(s) could not be generated (rerun to retry them): ${failures.join("; ")}`);
  return { table, state, finishedNow };
}
