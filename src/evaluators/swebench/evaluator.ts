/**
 * `swebench_harness`: the agent's patch graded like SWE-bench's run_evaluation.
 * 1. collect: `git diff` in the agent's runtime (repo_dir), debris and
 *    exclude_patterns filtered out;
 * 2. in the evaluation runtime (a fresh one with `refresh_runtime`, else the
 *    agent's, reset to the base commit first): apply the patch (git apply,
 *    git apply --reject, patch --fuzz=5);
 * 3. reset the files the test patch touches to the base commit, apply the
 *    test patch (a test patch that does not apply is the instance's fault: the
 *    evaluation fails naming `instance.test_patch`);
 * 4. run the tests between start/end markers, parse the log, grade
 *    (grading.ts). Reward 1.0 if and only if resolved (FULL).
 * Metadata: SWE-bench's report (patch_exists, patch_successfully_applied,
 * resolved, tests_status) plus empty_generation, failed_apply_patch,
 * test_timeout, resolution and the log's path.
 */
import { randomBytes } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { PolarError } from "../../protocol/errors.ts";
import type { EvalResult } from "../../protocol/schemas.ts";
import type { Runtime } from "../../runtimes/types.ts";
import type { EvaluatorFactory } from "../types.ts";
import { logProblem, resolution, testOutput, testsReport, type TestsStatus } from "./grading.ts";
import { SweInstance } from "./instance.ts";
import { LOG_PARSERS } from "./log-parsers.ts";
import { ALWAYS_EXCLUDED, DEFAULT_PATCH_COMMAND, applyScript, extractScript, filterPatch } from "./patch.ts";
import { END_TEST_OUTPUT, START_TEST_OUTPUT, repoSpec, splitModifiedNew, testDirectives } from "./specs.ts";

const TAIL = 4000;

export const SwebenchConfig = z.strictObject({
  instance: SweInstance,
  repo_dir: z.string().min(1).default("/testbed"),
  patch_command: z.string().min(1).default(DEFAULT_PATCH_COMMAND),
  exclude_patterns: z.array(z.string().min(1)).max(1000).default([]),
  apply_timeout: z.number().positive().max(86_400).default(120),
  test_timeout: z.number().positive().max(86_400).default(1800),
  /** Overrides the instance's `test_cmd` and the repository's default. */
  test_command: z.string().min(1).optional(),
  /** Overrides the instance's `log_parser` and the repository's default. */
  log_parser: z.enum(Object.keys(LOG_PARSERS) as [string, ...string[]]).optional(),
});
export type SwebenchConfig = z.infer<typeof SwebenchConfig>;

const Collected = z.object({ patch: z.string(), excluded: z.array(z.string()).default([]) });

const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

export const swebenchHarnessFactory: EvaluatorFactory = {
  name: "swebench_harness",
  configSchema: SwebenchConfig,
  create(config) {
    const c = config as SwebenchConfig;
    const inst = c.instance;
    const spec = repoSpec(inst.repo);
    const parserName = c.log_parser ?? inst.log_parser ?? spec.parser;
    const parser = LOG_PARSERS[parserName]!;
    const testCmd = c.test_command ?? inst.test_cmd ?? spec.testCmd;

    async function collect({ runtime, env, signal, timeoutMs }: { runtime: Runtime; env: Record<string, string>; signal: AbortSignal; timeoutMs: number }) {
      const r = await runtime.exec(extractScript(c.repo_dir, c.patch_command, inst.base_commit), {
        env,
        signal,
        timeoutMs: Math.min(timeoutMs, c.apply_timeout * 1000),
        category: "eval",
      });
      if (r.cancelled) throw new PolarError("cancelled", "session cancelled");
      if (r.timedOut) throw new PolarError("timeout", `patch extraction timed out after ${c.apply_timeout} s`);
      if (r.exitCode !== 0) throw new PolarError("evaluator", `patch extraction failed in ${c.repo_dir} (exit ${r.exitCode}): ${r.stderr.slice(-500)}`);
      return filterPatch(r.stdout, [...ALWAYS_EXCLUDED, ...c.exclude_patterns]);
    }

    return {
      name: "swebench_harness",
      remote: true,
      collect,
      async evaluate(input): Promise<EvalResult> {
        const { env, signal } = input;
        // Per evaluation: two sessions of a host-path runtime (local) never share it.
        const EVAL_DIR = `/tmp/polar-eval-${randomBytes(6).toString("hex")}`;
        const deadline = performance.now() + input.timeoutMs;
        const left = (capS: number) => Math.max(1, Math.min(deadline - performance.now(), capS * 1000));
        let collected = input.collected === undefined ? undefined : Collected.parse(input.collected);
        if (!collected) {
          if (!input.runtime) throw new PolarError("evaluator", "swebench_harness needs the agent's runtime to take the patch, and it is gone");
          collected = await collect({ runtime: input.runtime, env, signal, timeoutMs: left(c.apply_timeout) });
        }
        const rt = input.evalRuntime ?? input.runtime;
        const base = { mode: "swebench_harness", instance_id: inst.instance_id, patch_is_None: false, excluded_paths: collected.excluded };
        if (collected.patch.trim() === "") {
          return result(0, { ...base, patch_exists: false, patch_successfully_applied: false, resolved: false, empty_generation: true, failed_apply_patch: false, test_timeout: false, resolution: "NO" });
        }
        if (!rt) throw new PolarError("evaluator", "swebench_harness has no runtime to evaluate in");
        const run = async (script: string, capS: number) => {
          const r = await rt.exec(script, { env, signal, timeoutMs: left(capS), category: "eval" });
          if (r.cancelled || signal.aborted) throw new PolarError("cancelled", "session cancelled");
          return r;
        };
        await rt.exec(`mkdir -p ${EVAL_DIR}`, { signal, timeoutMs: left(30), category: "eval" });
        try {
          if (!input.evalRuntime) {
            // Evaluating in the agent's runtime: back to a clean checkout of the base commit first.
            const reset = await run(`cd ${q(c.repo_dir)} && git reset -q --hard ${inst.base_commit} && git clean -qfd`, c.apply_timeout);
            if (reset.exitCode !== 0) throw new PolarError("evaluator", `could not reset ${c.repo_dir} to instance.base_commit ${inst.base_commit}: ${reset.stderr.slice(-500)}`);
          }
          await rt.writeFile(`${EVAL_DIR}/patch.diff`, collected.patch.endsWith("\n") ? collected.patch : collected.patch + "\n");
          const applied = await run(applyScript(c.repo_dir, `${EVAL_DIR}/patch.diff`), c.apply_timeout);
          const applyLog = applied.stdout + applied.stderr;
          if (applied.timedOut || applied.exitCode !== 0) {
            return result(0, { ...base, patch_exists: true, patch_successfully_applied: false, resolved: false, empty_generation: false, failed_apply_patch: true, test_timeout: false, resolution: "NO", apply_output_tail: applyLog.slice(-TAIL) });
          }

          // The instance's test files back to the base commit (undoing the agent's edits), then the test patch.
          const { modified, created } = splitModifiedNew(inst.test_patch);
          await rt.writeFile(`${EVAL_DIR}/test.patch`, inst.test_patch.endsWith("\n") ? inst.test_patch : inst.test_patch + "\n");
          const prep = [
            `cd ${q(c.repo_dir)}`,
            modified.length ? `git checkout -q ${inst.base_commit} -- ${modified.map(q).join(" ")}` : "true",
            created.length ? `rm -f ${created.map(q).join(" ")}` : "true",
            `git apply -v ${EVAL_DIR}/test.patch`,
          ].join(" && ");
          const tp = await run(prep, c.apply_timeout);
          if (tp.exitCode !== 0) {
            throw new PolarError("evaluator", `instance.test_patch does not apply at instance.base_commit ${inst.base_commit} in ${c.repo_dir}: ${(tp.stderr || tp.stdout).slice(-800)}`, {
              details: { field: "instance.test_patch", instance_id: inst.instance_id },
            });
          }

          const directives = testDirectives(inst.test_patch, parserName);
          const testScript = [
            `cd ${q(c.repo_dir)}`,
            `exec >${EVAL_DIR}/test_output.log 2>&1`,
            `echo ${q(START_TEST_OUTPUT)}`,
            `${testCmd} ${directives.map(q).join(" ")}`,
            `rc=$?`,
            `echo ${q(END_TEST_OUTPUT)}`,
            `exit $rc`,
          ].join("\n");
          const t = await run(testScript, c.test_timeout);
          const log = await rt.readFile(`${EVAL_DIR}/test_output.log`).then((b) => Buffer.from(b).toString("utf8"), () => t.stdout + t.stderr);
          const logPath = input.artifactsDir ? await saveLog(input.artifactsDir, log) : null;
          const common = { ...base, patch_exists: true, patch_successfully_applied: true, empty_generation: false, failed_apply_patch: false, test_command: testCmd, log_parser: parserName, test_output_path: logPath, test_output_tail: log.slice(-TAIL), test_exit_code: t.exitCode };
          if (t.timedOut) {
            return result(0, { ...common, resolved: false, test_timeout: true, resolution: "NO", tests_status: testsReport(new Map(), inst.FAIL_TO_PASS, inst.PASS_TO_PASS) });
          }
          const problem = logProblem(log);
          let sm = problem ? new Map() : parser(testOutput(log));
          if (!problem && sm.size === 0) sm = parser(log); // SWE-bench's fallback: results printed outside the markers
          const report: TestsStatus = testsReport(sm, inst.FAIL_TO_PASS, inst.PASS_TO_PASS);
          const res = problem ? "NO" : resolution(report);
          return result(res === "FULL" ? 1 : 0, { ...common, resolved: res === "FULL", test_timeout: false, resolution: res, tests_status: report, ...(problem ? { log_problem: problem } : {}) });
        } finally {
          // Best effort: a cancelled or stopped runtime has nothing left to clean.
          await rt.exec(`rm -rf ${EVAL_DIR}`, { timeoutMs: 30_000, category: "eval" }).catch(() => undefined);
        }
      },
    };
  },
};

function result(reward: number, metadata: Record<string, unknown>): EvalResult {
  return { outcome_reward: reward, trace_rewards: null, outcome_reward_components: null, trace_reward_components: null, metadata: { ...metadata, reward } };
}

async function saveLog(dir: string, log: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, "test_output.log");
  await writeFile(path, log);
  return path;
}
