/**
 * `harbor`: a Harbor-format verifier. Uploads `tests_dir` (a directory on the
 * evaluating host) to /tests, runs `bash /tests/test.sh` (bounded by
 * `verifier_timeout` and the session budget), then reads the reward the
 * verifier wrote: /logs/verifier/reward.txt (a number), else
 * /logs/verifier/reward.json (a number, or the mean of an object's numeric
 * values). The reward is clamped to [0, 1] and accepted only when the verifier
 * exited 0; otherwise it is 0 and the reported value stays in the metadata.
 */
import { mkdir, stat, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { z } from "zod";
import { PolarError } from "../protocol/errors.ts";
import type { Runtime } from "../runtimes/types.ts";
import { assertUploadAllowed } from "../security/upload-roots.ts";
import type { EvaluatorFactory } from "./types.ts";

const Config = z.strictObject({
  tests_dir: z.string().min(1),
  verifier_timeout: z.number().positive().max(86_400).default(120),
});

const REWARD_TXT = "/logs/verifier/reward.txt";
const REWARD_JSON = "/logs/verifier/reward.json";

export const harborFactory: EvaluatorFactory = {
  name: "harbor",
  configSchema: Config,
  create(config) {
    const c = config as z.infer<typeof Config>;
    return {
      name: "harbor",
      async evaluate({ runtime, evalRuntime, env, signal, timeoutMs, artifactsDir, uploadRoots }) {
        const rt = evalRuntime ?? runtime;
        if (!rt) throw new PolarError("evaluator", "the harbor evaluator needs a runtime, and the agent's is gone");
        const testsDir = resolve(c.tests_dir);
        if (uploadRoots) assertUploadAllowed(c.tests_dir, uploadRoots, "harbor config.tests_dir");
        const info = await stat(testsDir).catch(() => null);
        if (!info?.isDirectory()) throw new PolarError("evaluator", `harbor config.tests_dir ${testsDir} is not a directory`, { details: { field: "config.tests_dir" } });
        await rt.exec("rm -rf /tests && mkdir -p /logs/verifier && rm -f /logs/verifier/reward.txt /logs/verifier/reward.json", { signal, timeoutMs: 30_000, category: "eval" });
        await rt.upload(testsDir, "/tests");
        const r = await rt.exec("bash /tests/test.sh", { env, signal, timeoutMs: Math.max(1, Math.min(timeoutMs, c.verifier_timeout * 1000)), category: "eval" });
        if (r.cancelled || signal.aborted) throw new PolarError("cancelled", "session cancelled");
        const output = `${r.stdout}${r.stderr ? `\n--- stderr ---\n${r.stderr}` : ""}`;
        let outputPath: string | null = null;
        if (artifactsDir) {
          await mkdir(artifactsDir, { recursive: true });
          outputPath = join(artifactsDir, "verifier_output.log");
          await writeFile(outputPath, output);
        }
        const reported = r.timedOut ? null : await readReward(rt);
        const accepted = !r.timedOut && r.exitCode === 0 && reported !== null;
        const reward = accepted ? Math.min(1, Math.max(0, reported)) : 0;
        return {
          outcome_reward: reward,
          trace_rewards: null,
          outcome_reward_components: null,
          trace_reward_components: null,
          metadata: {
            mode: "harbor",
            resolved: reward === 1,
            reward,
            verifier_reported_reward: reported,
            verifier_reward_accepted: accepted,
            verifier_exit_code: r.exitCode,
            verifier_timeout: r.timedOut,
            test_output_path: outputPath,
            test_output_tail: output.slice(-2000),
          },
        };
      },
    };
  },
};

/** The verifier's reward, or null when it wrote none (or nothing numeric). */
async function readReward(rt: Runtime): Promise<number | null> {
  const read = (p: string) => rt.readFile(p).then((b) => Buffer.from(b).toString("utf8"), () => null);
  const txt = await read(REWARD_TXT);
  if (txt !== null && txt.trim() !== "") {
    const v = Number(txt.trim());
    return Number.isFinite(v) ? v : null;
  }
  const json = await read(REWARD_JSON);
  if (json === null) return null;
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return null; // malformed reward file: no reward, reported as such
  }
  if (typeof v === "number") return Number.isFinite(v) ? v : null;
  if (v && typeof v === "object" && !Array.isArray(v)) {
    const nums = Object.values(v).filter((x): x is number => typeof x === "number" && Number.isFinite(x));
    return nums.length ? nums.reduce((a, b) => a + b, 0) / nums.length : null;
  }
  return null;
}
