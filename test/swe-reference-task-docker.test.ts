/**
 * The reference's SWE-bench task, as its own submission script builds it for
 * SWE-bench Verified: a named harness working in a copy of the repository at
 * /polar/session/workspace (staged by `prepare`), network `host`, the patch
 * taken from the workspace with `git add -A && git diff --cached --binary`,
 * and `swebench_harness` grading it with `refresh_runtime` in a fresh
 * runtime's pristine /testbed. Only the instance (a raw SWE-bench row:
 * no polar-specific fields) and its image point at a local one, and the
 * prepare step does not `npm install` the CLI (polar mounts its pinned tools
 * cache). Codex, unmodified, follows a playbook that writes the gold fix.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { installTools } from "../src/tools/install.ts";
import { toolsDir } from "../src/tools/paths.ts";
import { expectRecordsFromSim, waitTask } from "./harness-e2e-helpers.ts";
import { dockerUnavailable } from "./helpers/docker.ts";
import { sweImagesMissing, sweInstance } from "./helpers/swe.ts";
import { startTestSystem, TEST_INFRA, type TestSystem } from "./helpers/system.ts";

const docker = new Dockerode();
const missing = (await dockerUnavailable("swe-reference-task", docker)) ?? (await sweImagesMissing(docker));
// The default dispatch ack wait: the sim tokenizing codex's long prompts shares this process with the
// gateway, and on a loaded machine a short ack wait would redeliver the running session.
const INFRA = { ...TEST_INFRA, dispatchAckWaitMs: 30_000 };
const GATEWAY = `gw-swe-ref-${process.pid}`;

// The reference's INIT staging of the repository into the workspace (its harness install left out).
const PREPARE =
  "rm -rf /polar/session/workspace && " +
  'mkdir -p /polar/session/logs/agent /polar/session/workspace "$HOME/.venv/bin" && ' +
  "cp -a /testbed/. /polar/session/workspace/ && " +
  'ln -sf /opt/miniconda3/envs/testbed/bin/python "$HOME/.venv/bin/python" && ' +
  'ln -sf /opt/miniconda3/envs/testbed/bin/python "$HOME/.venv/bin/python3" && ' +
  "git config --global core.pager '' && " +
  "cd /polar/session/workspace && git reset --hard; true";

/** The sim's playbook: codex looks, then writes the instance's gold fix. */
const PLAYBOOK = {
  name: "swe-reference",
  rules: [
    {
      name: "intervals-touching",
      match: "merge\\(\\) keeps touching intervals apart",
      steps: [
        { run: "grep -n 'start < out' intervals/merge.py" },
        { think: "Closed intervals that touch overlap: compare with <=.", run: "sed -i 's/if out and start < out\\[-1\\]\\[1\\]:/if out and start <= out[-1][1]:/' intervals/merge.py" },
      ],
      done: "Touching intervals are now merged.",
    },
  ],
};

describe.skipIf(missing !== undefined)("the reference's swebench_harness task", () => {
  let sys: TestSystem;
  let root: string;
  const { instance, image } = sweInstance("intervals");

  beforeAll(async () => {
    await installTools({ names: ["codex"] });
    root = mkdtempSync(join(tmpdir(), "polar-swe-ref-"));
    writeFileSync(join(root, "playbook.json"), JSON.stringify(PLAYBOOK));
    sys = await startTestSystem({ playbookPath: join(root, "playbook.json"), maxModelLen: 131_072 });
    await sys.startSupervisor({ infra: INFRA });
    await sys.startGateway({ nodeId: GATEWAY, infra: INFRA, toolsDir: toolsDir(), workRoot: join(root, "work") });
  }, 600_000);

  afterAll(async () => {
    await sys?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it("is accepted as it is and rewarded 1.0 for the gold fix made in the workspace copy", async () => {
    // A raw dataset row: SWE-bench's fields only (Verified's rows also carry `difficulty`).
    expect(Object.keys(instance).filter((k) => k === "test_cmd" || k === "log_parser")).toEqual([]);
    const row: Record<string, unknown> = { ...instance, difficulty: "<15 min fix" };
    const task = {
      task_id: "swebench-codex-polar-swe__intervals-2-ref",
      instruction: String(row.problem_statement).trim(),
      num_samples: 1,
      timeout_seconds: 3600.0,
      runtime: {
        backend: "docker",
        image,
        prepare: [{ type: "exec", command: PREPARE }],
        env: {},
        network: "host",
        workdir: "/polar/session/workspace",
      },
      agent: { harness: "codex", model_name: "Qwen/Qwen3-8B" },
      builder: { strategy: "prefix_merging" },
      evaluator: {
        strategy: "swebench_harness",
        config: {
          repo_dir: "/testbed",
          patch_command: "cd /polar/session/workspace && git add -A && git diff --cached --binary",
          instance: row,
          exclude_patterns: [],
        },
        refresh_runtime: true,
      },
    };
    const accepted = await request<{ task_id: string }>(sys.client, SUBJECTS.api.submit, task);
    expect(accepted.task_id).toBe(task.task_id);
    const st = await waitTask(sys, task.task_id, 300_000);
    const r = st.results[0]!;
    expect(r.status, `${r.error}\n${JSON.stringify(r.agent_result?.metadata)}`).toBe("COMPLETED");
    expectRecordsFromSim(sys, r);
    // The model name the harness sent is answered by the served model.
    expect(r.completion_session!.completions[0]!.original_request).toMatchObject({ model: "Qwen/Qwen3-8B" });

    const ev = r.trajectory.metadata.evaluation as Record<string, any>;
    expect(ev).toMatchObject({
      strategy: "swebench_harness",
      outcome_reward: 1,
      resolved: true,
      resolution: "FULL",
      patch_successfully_applied: true,
      instance_id: instance.instance_id,
      // No test command or parser given: the pytest default, as SWE-bench's tables for an unknown repository.
      log_parser: "pytest",
      evaluator_node_id: `${GATEWAY}-ev`,
    });
    expect(ev.tests_status).toEqual({
      FAIL_TO_PASS: { success: JSON.parse(instance.FAIL_TO_PASS), failure: [] },
      PASS_TO_PASS: { success: JSON.parse(instance.PASS_TO_PASS), failure: [] },
    });
    expect(r.trajectory.traces.every((t) => t.reward === 1)).toBe(true);
    expect(r.timing.eval_container_start_ms).toBeGreaterThan(0);
    expect(await docker.listContainers({ all: true, filters: { label: [`polar.gateway=${GATEWAY}`] } })).toEqual([]);
    expect(await docker.listContainers({ all: true, filters: { label: [`polar.gateway=${GATEWAY}-ev`] } })).toEqual([]);
  }, 420_000);
});
