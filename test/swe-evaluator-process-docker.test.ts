/**
 * SWE-style sessions graded on evaluator processes, end to end on the real
 * Docker engine: the gateway hosts no evaluator, so every `swebench_harness`
 * evaluation (refresh_runtime) goes through POLAR_EVALS to `polar evaluator`
 * processes started from the CLI.
 * - codex, unmodified, in the durations instance's image with network `none`,
 *   follows config/playbooks/swe.json (served by the sim), which makes it
 *   write the gold fix; the evaluator process grades it FULL, reward 1.0.
 * - two evaluator processes; the one that takes the evaluation is killed with
 *   SIGKILL mid-evaluation (its test command sleeps); the other one grades the
 *   redelivered request, and the session gets its reward exactly once.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import type { SessionResult, SystemStatus } from "../src/protocol/schemas.ts";
import { STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import { reapContainers } from "../src/runtimes/reaper.ts";
import { installTools } from "../src/tools/install.ts";
import { toolsDir } from "../src/tools/paths.ts";
import { expectRecordsFromSim, waitTask } from "./harness-e2e-helpers.ts";
import { dockerUnavailable } from "./helpers/docker.ts";
import { spawnEvaluator, type EvaluatorProcess } from "./helpers/evaluator-process.ts";
import { sweImagesMissing, sweInstance } from "./helpers/swe.ts";
import { startTestSystem, TEST_INFRA, type TestSystem } from "./helpers/system.ts";

const docker = new Dockerode();
const missing = (await dockerUnavailable("swe-evaluator-process", docker)) ?? (await sweImagesMissing(docker));
// The default dispatch ack wait: the sim tokenizing codex's long prompts shares this process with the
// gateway, and on a loaded machine a short ack wait would redeliver the running session.
const INFRA = { ...TEST_INFRA, dispatchAckWaitMs: 30_000 };
const GATEWAY = `gw-swe-proc-${process.pid}`;
const EV = (n: string) => `ev-swe-${n}-${process.pid}`;

function taskFile(name: string): Record<string, any> {
  return JSON.parse(readFileSync(new URL(`../config/tasks/swe-${name}.json`, import.meta.url), "utf8"));
}

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    // A poll that fails (a status request timing out on a loaded machine) only means "not yet".
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const evaluation = (r: SessionResult) => r.trajectory.metadata.evaluation as Record<string, any>;
const containersOf = async (node: string) => docker.listContainers({ all: true, filters: { label: [`polar.gateway=${node}`] } });
const status = (sys: TestSystem) => request<SystemStatus>(sys.client, SUBJECTS.api.status, {}, { timeoutMs: 5000 });

describe.skipIf(missing !== undefined)("swebench_harness on evaluator processes", () => {
  let sys: TestSystem;
  let root: string;
  let config: string;
  const procs: EvaluatorProcess[] = [];
  const durations = sweInstance("durations").instance;

  beforeAll(async () => {
    await installTools({ names: ["codex"] });
    root = mkdtempSync(join(tmpdir(), "polar-swe-proc-"));
    config = join(root, "polar.json");
    writeFileSync(config, JSON.stringify({ evaluator: { heartbeat_interval_ms: 300 }, infra: { eval_ack_wait_ms: 2000 } }));
    // Codex's system prompt and tools are long: the sim serves a long context.
    sys = await startTestSystem({ playbookPath: "config/playbooks/swe.json", maxModelLen: 131_072 });
    await sys.startSupervisor({ infra: INFRA });
    await sys.startGateway({ nodeId: GATEWAY, infra: INFRA, evaluator: false, toolsDir: toolsDir(), workRoot: join(root, "work"), limits: { maxRunWorkers: 2 } });
  }, 600_000);

  afterAll(async () => {
    for (const p of procs) await p.stop();
    await sys?.stop();
    // A killed evaluator's runtime outlives it until that node restarts (which reaps it): do it here.
    for (const p of procs) await reapContainers(docker, p.nodeId).catch(() => 0);
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it("codex in the instance's image (network none) writes the gold fix; the evaluator process grades it FULL, reward 1.0", async () => {
    const ev = await spawnEvaluator(sys.nats.url, EV("codex"), ["-c", config]);
    procs.push(ev);
    const base = taskFile("durations");
    const task: Record<string, any> = {
      ...base,
      task_id: "swe-codex-durations",
      runtime: { ...base.runtime, prepare: [] },
      agent: { harness: "codex", model_name: "Qwen/Qwen3-8B" },
      builder: { strategy: "prefix_merging" },
    };
    expect(task.runtime).toMatchObject({ backend: "docker", image: sweInstance("durations").image, network: "none", workdir: "/testbed" });
    expect(task.evaluator).toMatchObject({ strategy: "swebench_harness", refresh_runtime: true });
    await request(sys.client, SUBJECTS.api.submit, task);
    const st = await waitTask(sys, task.task_id, 300_000);
    const r = st.results[0]!;
    expect(r.status, `${r.error}\n${JSON.stringify(r.agent_result?.metadata)}`).toBe("COMPLETED");

    // The agent was codex, talking to the sim through the proxy (Responses API), running the playbook's commands.
    const records = r.completion_session!.completions;
    expect(records.length).toBeGreaterThanOrEqual(3);
    expect(records.every((x) => x.api_type === "openai_responses")).toBe(true);
    expectRecordsFromSim(sys, r);
    const calls = records.flatMap((x) => JSON.stringify(x.response)).join("\n");
    expect(calls).toContain("if seconds >= 3600:");

    // Graded as SWE-bench grades, on the evaluator process.
    const e = evaluation(r);
    expect(e).toMatchObject({
      strategy: "swebench_harness",
      outcome_reward: 1,
      resolved: true,
      resolution: "FULL",
      patch_exists: true,
      patch_successfully_applied: true,
      empty_generation: false,
      failed_apply_patch: false,
      test_timeout: false,
      log_parser: "django",
      instance_id: durations.instance_id,
      evaluator_node_id: ev.nodeId,
      evaluator_delivery_count: 1,
    });
    expect(e.tests_status).toEqual({
      FAIL_TO_PASS: { success: JSON.parse(durations.FAIL_TO_PASS), failure: [] },
      PASS_TO_PASS: { success: JSON.parse(durations.PASS_TO_PASS), failure: [] },
    });
    expect(e.test_output_tail).toContain("test_exactly_one_hour");
    expect(r.node_id).toBe(GATEWAY);
    expect(r.trajectory.traces.length).toBeGreaterThan(0);
    expect(r.trajectory.traces.every((t) => t.reward === 1)).toBe(true);
    expect(r.timing.eval_container_start_ms).toBeGreaterThan(0);
    expect(r.timing.eval_wait_ms).toBeGreaterThan(0);

    // The evaluator process counts it; the gateway hosts none.
    const s = await until("the evaluator's metrics after the evaluation", async () => {
      const x = await status(sys);
      return x.evaluators.find((v) => v.node_id === ev.nodeId)?.metrics.completed === 1 ? x : undefined;
    });
    expect(s.evaluators.map((v) => v.node_id)).toEqual([ev.nodeId]);
    expect(s.evaluators[0]).toMatchObject({ kind: "evaluator", hosted_by: null, metrics: { inflight: 0, failed: 0, redelivered: 0 } });
    expect(await containersOf(GATEWAY)).toEqual([]);
    expect(await containersOf(ev.nodeId)).toEqual([]);
    await procs.splice(procs.indexOf(ev), 1)[0]!.stop();
  }, 420_000);

  it("kill -9 of the evaluator mid-evaluation: the other evaluator process grades the redelivered request, one reward", async () => {
    const pair = [await spawnEvaluator(sys.nats.url, EV("a"), ["-c", config]), await spawnEvaluator(sys.nats.url, EV("b"), ["-c", config])];
    procs.push(...pair);
    const base = taskFile("durations");
    // The python tool agent (shell harness) follows the same playbook: the gold fix. The test command
    // sleeps first, so that the first evaluation is still running when its evaluator is killed.
    const testCmd = `sleep 4; ${durations.test_cmd as string}`;
    // Every evaluation reply published, whoever sends it (the gateway purges a reply once it has read it).
    const replies: string[] = [];
    const sub = sys.client.subscribe(SUBJECTS.streamSubjects.evalResults, { callback: (_err, m) => void replies.push(m.subject) });
    const task = { ...base, task_id: "swe-kill9", evaluator: { ...base.evaluator, config: { ...base.evaluator.config, test_command: testCmd } } };
    await request(sys.client, SUBJECTS.api.submit, task);

    // Whichever evaluator took the request has started its evaluation runtime: kill it there.
    const doomed = await until("an evaluator to start evaluating", async () => {
      for (const p of pair) if ((await containersOf(p.nodeId)).length > 0) return p;
      return undefined;
    }, 240_000);
    const survivor = pair.find((p) => p !== doomed)!;
    doomed.child.kill("SIGKILL");
    expect(await doomed.exited).toBeNull();
    expect(doomed.child.signalCode).toBe("SIGKILL");

    const st = await waitTask(sys, task.task_id, 240_000);
    expect(st.results).toHaveLength(1);
    const r = st.results[0]!;
    expect(r.status, `${r.error}`).toBe("COMPLETED");
    expect(evaluation(r)).toMatchObject({ outcome_reward: 1, resolution: "FULL", test_command: expect.stringContaining("sleep 4;"), evaluator_node_id: survivor.nodeId, evaluator_delivery_count: 2 });
    expect(evaluation(r).tests_status.FAIL_TO_PASS).toEqual({ success: JSON.parse(durations.FAIL_TO_PASS), failure: [] });
    expect(r.trajectory.traces.every((t) => t.reward === 1)).toBe(true);

    // Exactly once: one evaluation reply for the session (the killed evaluator never answered) and one result.
    sub.unsubscribe();
    expect(replies).toEqual([SUBJECTS.evalResult(r.session_id)]);
    const jsm = await jetstreamManager(sys.client);
    const results = SUBJECTS.result(task.task_id);
    expect((await jsm.streams.info(STREAMS.results, { subjects_filter: results })).state.subjects).toEqual({ [results]: 1 });

    const ev = await until("the survivor's metrics after the evaluation", async () => {
      const x = (await status(sys)).evaluators.find((v) => v.node_id === survivor.nodeId);
      return x && x.metrics.completed === 1 ? x : undefined;
    });
    expect(ev.metrics).toMatchObject({ redelivered: 1, completed: 1, failed: 0, inflight: 0 });
    // The survivor removed its runtime. The killed one's outlives it until it is reaped: by its node
    // restarting (as here), or by any gateway or evaluator starting on this host, since its owner process
    // is dead; test files running alongside start those, so it may already be gone.
    expect(await containersOf(survivor.nodeId)).toEqual([]);
    expect(await containersOf(GATEWAY)).toEqual([]);
    expect(await reapContainers(docker, doomed.nodeId)).toBeLessThanOrEqual(1);
    expect(await containersOf(doomed.nodeId)).toEqual([]);
  }, 420_000);
});
