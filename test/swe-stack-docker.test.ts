// swebench_harness with refresh_runtime through the whole stack: supervisor,
// gateway, Docker runtimes of config/swe's instance images, the sim following
// config/playbooks/swe.json, and the python tool agent under the shell harness.
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import type { SessionResult, TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { dockerUnavailable } from "./helpers/docker.ts";
import { sweImagesMissing, sweInstance } from "./helpers/swe.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const docker = new Dockerode();
const missing = (await dockerUnavailable("swe-stack", docker)) ?? (await sweImagesMissing(docker));
const NODE = `gw-swe-stack-${process.pid}`;
/** A gateway that evaluates in process (no evaluator actors): its fresh runtime warms up beside the agent. */
const LOCAL_NODE = `gw-swe-local-${process.pid}`;

function taskFile(name: string): Record<string, any> {
  return JSON.parse(readFileSync(new URL(`../config/tasks/swe-${name}.json`, import.meta.url), "utf8"));
}

async function waitTask(sys: TestSystem, taskId: string, timeoutMs: number): Promise<TaskStatus> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: taskId, with_results: true });
    if (["completed", "failed", "cancelled"].includes(st.status)) return st;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`task ${taskId} did not finish within ${timeoutMs} ms`);
}

const evaluation = (r: SessionResult) => r.trajectory.metadata.evaluation as Record<string, any>;
const containersOf = async (node = NODE) => (await docker.listContainers({ all: true, filters: { label: [`polar.gateway=${node}`] } })).map((c) => c.Names[0]);

describe.skipIf(missing !== undefined)("swebench_harness through the stack", () => {
  let sys: TestSystem;
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "polar-swe-stack-"));
    sys = await startTestSystem({ playbookPath: "config/playbooks/swe.json" });
    await sys.startSupervisor();
    await sys.startGateway({ nodeId: NODE, workRoot: join(root, "work"), limits: { maxRunWorkers: 4, maxInitWorkers: 4, maxPostrunWorkers: 4 } });
    await sys.startGateway({ nodeId: LOCAL_NODE, pool: "swe-local", workRoot: join(root, "work-local"), remoteEvaluation: false, evaluator: false });
  }, 120_000);
  afterAll(async () => {
    await sys?.stop();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("config/tasks/swe-durations.json (swebench_harness, refresh_runtime) is rewarded on a local instance by the gateway's own evaluator actor", async () => {
    const task = taskFile("durations");
    expect(task.evaluator).toMatchObject({ strategy: "swebench_harness", refresh_runtime: true });
    await request(sys.client, SUBJECTS.api.submit, task);
    const st = await waitTask(sys, task.task_id, 240_000);
    const r = st.results[0]!;
    expect(r.status, `${r.error} ${JSON.stringify(r.agent_result?.metadata)}`).toBe("COMPLETED");
    const ev = evaluation(r);
    expect(ev).toMatchObject({ strategy: "swebench_harness", resolved: true, resolution: "FULL", outcome_reward: 1, patch_successfully_applied: true, log_parser: "django" });
    expect(ev.tests_status.FAIL_TO_PASS.success).toEqual(JSON.parse(sweInstance("durations").instance.FAIL_TO_PASS));
    // Graded by the gateway's own evaluator actor, through POLAR_EVALS.
    expect(ev).toMatchObject({ evaluator_node_id: `${NODE}-ev`, evaluator_delivery_count: 1 });
    expect(r.trajectory.traces.length).toBeGreaterThan(0);
    expect(r.trajectory.traces.every((t) => t.reward === 1)).toBe(true);
    // The fresh runtime was started and prepared (on the evaluator).
    expect(r.timing.eval_container_start_ms).toBeGreaterThan(0);
    expect(r.timing.eval_runtime_validation_ms).toBe(r.timing.eval_container_start_ms);
    expect(r.timing.eval_prepare_ms).toBeGreaterThanOrEqual(0);
    expect(r.timing.eval_ms).toBeGreaterThan(0);
    expect(await containersOf()).toEqual([]);
  }, 300_000);

  it("a group of 12 whose playbook writes the gold fix or a partial one gets mixed rewards, each matching its patch", async () => {
    // Each session picks gold or partial with p 0.5 (seeded by its random session id): with 8, one run in
    // 128 drew the same for all; with 12, one in 2,048.
    const task = { ...taskFile("textkit"), task_id: "swe-textkit-12", num_samples: 12 };
    await request(sys.client, SUBJECTS.api.submit, task);
    const st = await waitTask(sys, task.task_id, 420_000);
    expect(st.results).toHaveLength(12);
    const rewards = st.results.map((r) => evaluation(r).outcome_reward);
    for (const r of st.results) {
      expect(r.status, `${r.error}`).toBe("COMPLETED");
      const ev = evaluation(r);
      // reward 1 exactly for FULL; the other choice collapses into "-" only, which leaves one FAIL_TO_PASS failing.
      expect([ev.resolution, ev.outcome_reward]).toEqual(ev.resolved ? ["FULL", 1] : ["PARTIAL", 0]);
      expect(r.timing.eval_container_start_ms).toBeGreaterThan(0);
    }
    expect(rewards).toContain(1);
    expect(rewards).toContain(0);
    expect(await containersOf()).toEqual([]);
  }, 480_000);

  it("malformed instances end clearly: FAIL_TO_PASS missing is refused at submit; a test_patch that does not apply and a missing image end the session naming the field", async () => {
    const base = taskFile("textkit");
    const { FAIL_TO_PASS: _, ...noF2P } = base.evaluator.config.instance;
    const refused = (await request(sys.client, SUBJECTS.api.submit, { ...base, task_id: "swe-bad-f2p", evaluator: { ...base.evaluator, config: { ...base.evaluator.config, instance: noF2P } } }).catch((e) => e)) as { code: string; message: string };
    expect(refused.code).toBe("validation");
    expect(refused.message).toContain("evaluator.config.instance.FAIL_TO_PASS");

    const inst = base.evaluator.config.instance;
    const badTestPatch = { ...inst, test_patch: inst.test_patch.replace("def test_digits_kept():", "def test_renamed_upstream():") };
    await request(sys.client, SUBJECTS.api.submit, { ...base, task_id: "swe-bad-tp", evaluator: { ...base.evaluator, config: { ...base.evaluator.config, instance: badTestPatch } } });
    await request(sys.client, SUBJECTS.api.submit, { ...base, task_id: "swe-bad-image", runtime: { ...base.runtime, image: "sweb.eval.x86_64.polar-swe_1776_absent-0:latest" } });
    await request(sys.client, SUBJECTS.api.submit, { ...base, task_id: "swe-bad-evalprep", runtime: { ...base.runtime, eval_prepare: [{ type: "exec", command: "echo no such tool >&2; exit 3" }] } });
    const tp = (await waitTask(sys, "swe-bad-tp", 240_000)).results[0]!;
    expect(tp.status).toBe("ERROR");
    expect(tp.error).toMatch(/evaluator failed: instance\.test_patch does not apply at instance\.base_commit/);
    const img = (await waitTask(sys, "swe-bad-image", 60_000)).results[0]!;
    expect(img.status).toBe("ERROR");
    expect(img.error).toMatch(/runtime initialization failed: .*runtime\.image: docker image sweb\.eval\.x86_64\.polar-swe_1776_absent-0:latest is not present/);
    const ep = (await waitTask(sys, "swe-bad-evalprep", 240_000)).results[0]!;
    expect(ep.status).toBe("ERROR");
    expect(ep.error).toMatch(/evaluator failed: evaluation runtime failed: runtime\.eval_prepare failed in the evaluation runtime: .*no such tool/);
    expect(await containersOf()).toEqual([]);
  }, 300_000);

  it("a cancel while the agent runs also removes the fresh evaluation runtime warming up beside it", async () => {
    const base = taskFile("intervals");
    const task = { ...base, task_id: "swe-cancel", pool: "swe-local", agent: { harness: "shell", custom_shell: { command: "sleep 120" } } };
    await request(sys.client, SUBJECTS.api.submit, task);
    const deadline = Date.now() + 120_000;
    let names: string[] = [];
    while (Date.now() < deadline && !(names.some((n) => n.endsWith("-eval")) && names.length === 2)) {
      names = await containersOf(LOCAL_NODE);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(names.filter((n) => n.endsWith("-eval"))).toHaveLength(1);
    await request(sys.client, SUBJECTS.api.cancel, { task_id: "swe-cancel" });
    const st = await waitTask(sys, "swe-cancel", 60_000);
    expect(st.results[0]!.status).toBe("ERROR");
    expect(st.results[0]!.error).toBe("session cancelled");
    // Both containers are removed as the session's teardown finishes.
    const gone = Date.now() + 30_000;
    while (Date.now() < gone && (await containersOf(LOCAL_NODE)).length) await new Promise((r) => setTimeout(r, 200));
    expect(await containersOf(LOCAL_NODE)).toEqual([]);
  }, 240_000);
});
