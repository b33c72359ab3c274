// harbor and test_on_output (alias command) on the real Docker engine.
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEvaluatorRegistry } from "../src/evaluators/registry.ts";
import type { EvaluateInput } from "../src/evaluators/types.ts";
import { RuntimeSpec } from "../src/protocol/schemas.ts";
import { createRuntimeRegistry } from "../src/runtimes/registry.ts";
import type { Runtime } from "../src/runtimes/types.ts";
import { dockerUnavailable, TEST_IMAGE } from "./helpers/docker.ts";
import { type FakeProxy, makeCtx, makeSessionDir, startFakeProxy } from "./runtime-helpers.ts";

const docker = new Dockerode();
const missing = await dockerUnavailable("evaluators-docker", docker);
const evaluators = createEvaluatorRegistry();

describe.skipIf(missing !== undefined)("harbor and test_on_output in a container", () => {
  let proxy: FakeProxy;
  let rt: Runtime;
  let root: string;
  beforeAll(async () => {
    proxy = await startFakeProxy();
    root = await mkdtemp(join(tmpdir(), "polar-harbor-"));
    const dir = await makeSessionDir();
    rt = createRuntimeRegistry({ docker }).resolve({ strategy: "docker" }, { spec: RuntimeSpec.parse({ backend: "docker", image: TEST_IMAGE, workdir: "/workspace" }), ctx: makeCtx(dir, proxy, { gatewayId: `gw-harbor-${process.pid}` }) });
    await rt.start();
  }, 120_000);
  afterAll(async () => {
    await rt?.stop();
    await proxy?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  const input = (extra: Partial<EvaluateInput> = {}): EvaluateInput => ({
    trajectory: { status: "COMPLETED", metadata: {}, traces: [], error: null },
    sessionId: "s",
    taskId: "t",
    agentResult: null,
    runtime: rt,
    env: {},
    signal: new AbortController().signal,
    timeoutMs: 60_000,
    ...extra,
  });

  /** A Harbor tests folder whose test.sh runs `script` (with a helper file beside it). */
  async function testsDir(name: string, script: string): Promise<string> {
    const dir = join(root, name);
    await mkdir(join(dir, "lib"), { recursive: true });
    await writeFile(join(dir, "lib", "expected.txt"), "42\n");
    await writeFile(join(dir, "test.sh"), `#!/bin/bash\n${script}\n`);
    await chmod(join(dir, "test.sh"), 0o755);
    return dir;
  }

  async function harbor(script: string, config: Record<string, unknown> = {}, extra: Partial<EvaluateInput> = {}) {
    const dir = await testsDir(`t${Math.random().toString(36).slice(2)}`, script);
    const ev = evaluators.resolve({ strategy: "harbor", config: { tests_dir: dir, ...config } }, {});
    const artifactsDir = join(root, "art");
    const r = await ev.evaluate(input({ artifactsDir, ...extra }));
    return { r, m: r.metadata as Record<string, any> };
  }

  it("uploads tests_dir to /tests, runs test.sh, reads reward.txt; the output is kept", async () => {
    const { r, m } = await harbor("echo 42 > /workspace/answer; diff /workspace/answer /tests/lib/expected.txt && echo 0.7 > /logs/verifier/reward.txt; echo checked");
    expect(r.outcome_reward).toBe(0.7);
    expect(m).toMatchObject({ mode: "harbor", reward: 0.7, resolved: false, verifier_reported_reward: 0.7, verifier_reward_accepted: true, verifier_exit_code: 0, verifier_timeout: false });
    expect(await readFile(m.test_output_path, "utf8")).toContain("checked");
  });

  it("reward.json when there is no reward.txt: a number, or the mean of an object's numbers; clamped to [0, 1]", async () => {
    expect((await harbor(`echo '{"tests": 1, "style": 0.5, "note": "x"}' > /logs/verifier/reward.json`)).r.outcome_reward).toBe(0.75);
    expect((await harbor("echo 3 > /logs/verifier/reward.json")).m).toMatchObject({ reward: 1, resolved: true, verifier_reported_reward: 3 });
    expect((await harbor("echo -2 > /logs/verifier/reward.txt")).r.outcome_reward).toBe(0);
  });

  it("a reward is accepted only when the verifier exits 0; a leftover reward from an earlier run is not read", async () => {
    const failed = await harbor("echo 1 > /logs/verifier/reward.txt; exit 3");
    expect(failed.r.outcome_reward).toBe(0);
    expect(failed.m).toMatchObject({ verifier_reported_reward: 1, verifier_reward_accepted: false, verifier_exit_code: 3 });
    const none = await harbor("true");
    expect(none.m).toMatchObject({ reward: 0, verifier_reported_reward: null, verifier_reward_accepted: false, verifier_exit_code: 0 });
  });

  it("verifier_timeout bounds test.sh", async () => {
    const t0 = performance.now();
    const { r, m } = await harbor("sleep 30; echo 1 > /logs/verifier/reward.txt", { verifier_timeout: 1 });
    expect(performance.now() - t0).toBeLessThan(20_000);
    expect(r.outcome_reward).toBe(0);
    expect(m).toMatchObject({ verifier_timeout: true, verifier_reward_accepted: false });
  });

  it("tests_dir outside the upload roots is refused", async () => {
    await expect(harbor("true", {}, { uploadRoots: [join(root, "elsewhere")] })).rejects.toThrow(/harbor config.tests_dir: host path .* is outside the allowed upload roots/);
  });

  it("test_on_output and its alias command run the check in the agent's runtime", async () => {
    for (const strategy of ["test_on_output", "command"]) {
      const ev = evaluators.resolve({ strategy, config: { command: "echo 0.25", reward_from: "stdout" } }, {});
      const r = await ev.evaluate(input());
      expect([r.outcome_reward, r.metadata.mode]).toEqual([0.25, strategy]);
    }
  });
});
