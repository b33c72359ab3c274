// swebench_harness on the real Docker engine against config/swe's instances:
// the patch is taken in an "agent" container, graded in a fresh one.
import { rm } from "node:fs/promises";
import Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEvaluatorRegistry } from "../src/evaluators/registry.ts";
import type { Evaluator } from "../src/evaluators/types.ts";
import { RuntimeSpec } from "../src/protocol/schemas.ts";
import { createRuntimeRegistry } from "../src/runtimes/registry.ts";
import type { Runtime } from "../src/runtimes/types.ts";
import { dockerUnavailable } from "./helpers/docker.ts";
import { sweImagesMissing, sweInstance, type SweName } from "./helpers/swe.ts";
import { type FakeProxy, makeCtx, makeSessionDir, startFakeProxy } from "./runtime-helpers.ts";

const docker = new Dockerode();
const missing = (await dockerUnavailable("swe-evaluator", docker)) ?? (await sweImagesMissing(docker));
const GATEWAY = `gw-swe-eval-${process.pid}`;
const evaluators = createEvaluatorRegistry();
const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

// Generous per-test timeouts: each case starts containers and runs git and pytest in them.
const T = 240_000;

describe.skipIf(missing !== undefined)("swebench_harness on Docker", () => {
  let proxy: FakeProxy;
  const dirs: string[] = [];
  const made: Runtime[] = [];
  beforeAll(async () => {
    proxy = await startFakeProxy();
  });
  afterAll(async () => {
    await Promise.all(made.map((r) => r.stop()));
    await proxy?.close();
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
    const left = await docker.listContainers({ all: true, filters: { label: [`polar.gateway=${GATEWAY}`] } });
    expect(left).toEqual([]);
  });

  async function container(image: string, role?: "eval"): Promise<Runtime> {
    const dir = await makeSessionDir("polar-swe-");
    dirs.push(dir);
    const spec = RuntimeSpec.parse({ backend: "docker", image, workdir: "/testbed" });
    const rt = createRuntimeRegistry({ docker }).resolve({ strategy: "docker" }, { spec, ctx: makeCtx(dir, proxy, { gatewayId: GATEWAY, role }) });
    made.push(rt);
    await rt.start();
    return rt;
  }

  // One agent and one evaluation container per instance, each reset to a clean checkout of the base
  // commit before every use (what a fresh container holds), so that the file starts few containers.
  const pool = new Map<string, Runtime>();
  async function clean(name: SweName, role?: "eval"): Promise<Runtime> {
    const key = `${name}/${role ?? "agent"}`;
    let rt = pool.get(key);
    if (!rt) pool.set(key, (rt = await container(sweInstance(name).image, role)));
    const r = await rt.exec(`cd /testbed && git reset -q --hard ${sweInstance(name).instance.base_commit} && git clean -qfdx && rm -rf /tmp/polar-eval-*`);
    expect(r.exitCode, r.stderr).toBe(0);
    return rt;
  }

  /** The agent's container after `edit` ran, then the evaluation in a clean container (or in the agent's with `sameRuntime`). */
  async function grade(name: SweName, edit: string, config: Record<string, unknown> = {}, opts: { sameRuntime?: boolean; collected?: unknown } = {}) {
    const { instance } = sweInstance(name);
    const ev: Evaluator = evaluators.resolve({ strategy: "swebench_harness", config: { instance, ...config } }, {});
    const agent = await clean(name);
    if (edit) {
      const r = await agent.exec(edit);
      expect(r.exitCode, r.stderr).toBe(0);
    }
    const signal = new AbortController().signal;
    const collected = opts.collected ?? (opts.sameRuntime ? undefined : await ev.collect!({ runtime: agent, env: {}, signal, timeoutMs: 60_000 }));
    const evalRuntime = opts.sameRuntime ? undefined : await clean(name, "eval");
    const artifactsDir = await makeSessionDir("polar-swe-art-");
    dirs.push(artifactsDir);
    const r = await ev.evaluate({
      trajectory: { status: "COMPLETED", metadata: {}, traces: [], error: null },
      sessionId: "s",
      taskId: "t",
      agentResult: null,
      runtime: opts.sameRuntime ? agent : undefined,
      evalRuntime,
      collected,
      artifactsDir,
      env: {},
      signal,
      timeoutMs: 120_000,
    });
    return { r, m: r.metadata as Record<string, any>, instance, collected: collected as { patch: string; excluded: string[] } | undefined };
  }

  const applyGold = (name: SweName) => `cd /testbed && printf '%s' ${q(sweInstance(name).instance.patch)} | git apply -`;

  it("gold patch on every instance (pytest, Django-style and SymPy-style runners) → FULL, reward 1.0, the log kept", async () => {
    for (const name of ["textkit", "intervals", "durations", "ratio"] as const) {
      const { r, m, instance } = await grade(name, applyGold(name));
      expect({ name, resolution: m.resolution, reward: r.outcome_reward }).toEqual({ name, resolution: "FULL", reward: 1 });
      expect(m).toMatchObject({ resolved: true, patch_exists: true, patch_successfully_applied: true, empty_generation: false, failed_apply_patch: false, test_timeout: false });
      expect(m.tests_status.FAIL_TO_PASS).toEqual({ success: JSON.parse(instance.FAIL_TO_PASS), failure: [] });
      expect(m.tests_status.PASS_TO_PASS).toEqual({ success: JSON.parse(instance.PASS_TO_PASS), failure: [] });
      expect(m.test_output_path).toMatch(/test_output\.log$/);
    }
  }, T);

  it("the patch is git's diff of the agent's changes without debris; new files included, excluded paths listed", async () => {
    const edit = `${applyGold("textkit")} && mkdir -p textkit/__pycache__ notes && echo x > notes/todo.txt && printf 'X = 1\\n' > textkit/extra.py && echo junk > textkit/__pycache__/slug.cpython-311.pyc && echo c > .coverage`;
    const { m, collected } = await grade("textkit", edit, { exclude_patterns: ["notes/**", ".coverage"] });
    expect(collected!.patch).toContain("diff --git a/textkit/slug.py b/textkit/slug.py");
    expect(collected!.patch).toContain("diff --git a/textkit/extra.py b/textkit/extra.py");
    expect(collected!.patch).not.toContain("__pycache__");
    expect(collected!.excluded.sort()).toEqual([".coverage", "notes/todo.txt"]);
    expect(m.resolution).toBe("FULL");
  }, T);

  it("evaluating in the agent's own runtime (no refresh_runtime) resets it to the base commit first", async () => {
    const { r, m } = await grade("intervals", applyGold("intervals"), {}, { sameRuntime: true });
    expect([m.resolution, r.outcome_reward]).toEqual(["FULL", 1]);
  }, T);

  it("empty patch → empty_generation, 0, nothing run", async () => {
    const { r, m } = await grade("textkit", "");
    expect(r.outcome_reward).toBe(0);
    expect(m).toMatchObject({ empty_generation: true, patch_exists: false, resolved: false, resolution: "NO" });
    expect(m.tests_status).toBeUndefined();
  }, T);

  it("a patch that does not apply → failed_apply_patch, 0, after every SWE-bench fallback", async () => {
    const bad = "diff --git a/textkit/slug.py b/textkit/slug.py\n--- a/textkit/slug.py\n+++ b/textkit/slug.py\n@@ -1,3 +1,3 @@\n-this line is not there\n-nor this\n-nor that\n+x\n+y\n+z\n";
    const { r, m } = await grade("textkit", "", {}, { collected: { patch: bad, excluded: [] } });
    expect(r.outcome_reward).toBe(0);
    expect(m).toMatchObject({ failed_apply_patch: true, patch_exists: true, patch_successfully_applied: false, resolved: false });
    expect(m.apply_output_tail).toContain("git apply");
    expect(m.apply_output_tail).toContain(">>>>> Patch Apply Failed");
  }, T);

  it("a fix that breaks a PASS_TO_PASS test → NO, 0", async () => {
    // Collapses runs (both FAIL_TO_PASS pass) but drops the accent folding.
    const edit = `cd /testbed && sed -i 's/^    text = unicodedata.*$/    pass/; s/\\[^a-z0-9\\]", sep/[^a-z0-9]+", sep/' textkit/slug.py`;
    const { r, m } = await grade("textkit", edit);
    expect([m.resolution, r.outcome_reward, m.resolved]).toEqual(["NO", 0, false]);
    expect(m.tests_status.FAIL_TO_PASS.failure).toEqual([]);
    expect(m.tests_status.PASS_TO_PASS.failure).toEqual(["tests/test_slug.py::test_unicode_accents"]);
  }, T);

  it("a partial fix → PARTIAL, 0", async () => {
    // Runs collapse, but always into "-", so the custom separator test still fails.
    const edit = `cd /testbed && sed -i 's/\\[^a-z0-9\\]", sep/[^a-z0-9]+", "-"/; s/return text.strip(sep)/return text.strip("-")/' textkit/slug.py`;
    const { r, m } = await grade("textkit", edit);
    expect([m.resolution, r.outcome_reward]).toEqual(["PARTIAL", 0]);
    expect(m.tests_status.FAIL_TO_PASS).toEqual({ success: ["tests/test_slug.py::test_collapses_runs"], failure: ["tests/test_slug.py::test_custom_separator_collapsed"] });
  }, T);

  it("a hanging test → test_timeout, 0, the test killed at test_timeout", async () => {
    const edit = `cd /testbed && sed -i 's/^    text = unicodedata.*$/    while True: pass/' textkit/slug.py`;
    const t0 = performance.now();
    const { r, m } = await grade("textkit", edit, { test_timeout: 3 });
    expect(performance.now() - t0).toBeLessThan(60_000);
    expect(r.outcome_reward).toBe(0);
    expect(m).toMatchObject({ test_timeout: true, resolved: false, patch_successfully_applied: true });
    expect(m.tests_status.FAIL_TO_PASS.failure).toHaveLength(2);
  }, T);

  it("the agent edits the tests to pass → not resolved: the test files are reset before the test patch", async () => {
    const edit = `cd /testbed && printf 'def test_collapses_runs():\\n    pass\\n\\n\\ndef test_custom_separator_collapsed():\\n    pass\\n' >> tests/test_slug.py && printf 'def test_touching_merged():\\n    pass\\n' > /dev/null`;
    const { r, m, collected } = await grade("textkit", edit);
    expect(collected!.patch).toContain("tests/test_slug.py");
    expect([m.resolution, r.outcome_reward]).toEqual(["NO", 0]);
    expect(m.tests_status.FAIL_TO_PASS.failure).toEqual(JSON.parse(sweInstance("textkit").instance.FAIL_TO_PASS));
  }, T);

  it("a test patch that does not apply fails the evaluation naming instance.test_patch", async () => {
    const { instance } = sweInstance("textkit");
    const broken = { ...instance, test_patch: instance.test_patch.replace("def test_digits_kept():", "def test_renamed_upstream():") };
    const ev = evaluators.resolve({ strategy: "swebench_harness", config: { instance: broken } }, {});
    const agent = await clean("textkit");
    await agent.exec(applyGold("textkit"));
    await expect(
      ev.evaluate({ trajectory: { status: "COMPLETED", metadata: {}, traces: [], error: null }, sessionId: "s", taskId: "t", agentResult: null, runtime: agent, env: {}, signal: new AbortController().signal, timeoutMs: 60_000 }),
    ).rejects.toThrow(/instance\.test_patch does not apply/);
  }, T);
});
