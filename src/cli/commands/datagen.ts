import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { PolarClient } from "../../client/client.ts";
import { runDatagen } from "../../datagen/run.ts";
import { readInstances } from "../../datagen/instances.ts";
import { PolarError, ValidationError } from "../../protocol/errors.ts";
import { resolveNatsUrl } from "../common.ts";

interface Opts {
  harness: string;
  samples: number;
  minReward: number;
  out: string;
  concurrency: number;
  taskTemplate?: string;
  imageTemplate: string;
  nats?: string;
  progressInterval: number;
}

export function register(program: Command): void {
  program
    .command("datagen")
    .description("offline SFT data generation: each SWE-bench-style instance becomes a task graded by swebench_harness; accepted sessions become SFT JSONL")
    .argument("<instances>", "JSONL of instances in SWE-bench's field names (instance_id, repo, base_commit, problem_statement, test_patch, FAIL_TO_PASS, PASS_TO_PASS; optional image)")
    .requiredOption("--harness <name>", "the agent harness (claude_code, codex, shell, ...)")
    .requiredOption("--out <dir>", "output directory (accepted.jsonl, rejected.jsonl, state.json, acceptance.txt/.json/.png)")
    .option("--samples <n>", "sessions per instance", Number, 1)
    .option("--min-reward <r>", "a session is accepted when its reward is at least this", Number, 1)
    .option("--concurrency <n>", "instances (tasks) in flight at once", Number, 4)
    .option("--task-template <file>", "a partial task JSON every instance's task starts from (agent settings, runtime prepare, timeout_seconds, builder, evaluator.config)")
    .option("--image-template <tpl>", "image of an instance without an `image` field ({instance_id}, {id_1776}: SWE-bench's naming)", "sweb.eval.x86_64.{id_1776}:latest")
    .option("--nats <url>", "NATS server URL (default: POLAR_NATS_URL or the running `polar up`)")
    .option("--progress-interval <s>", "seconds between progress lines when the output is not a terminal", Number, 10)
    .action(async (file: string, o: Opts) => {
      for (const [k, v, ok] of [
        ["--samples", o.samples, Number.isInteger(o.samples) && o.samples >= 1 && o.samples <= 10_000],
        ["--concurrency", o.concurrency, Number.isInteger(o.concurrency) && o.concurrency >= 1 && o.concurrency <= 1024],
        ["--min-reward", o.minReward, Number.isFinite(o.minReward)],
        ["--progress-interval", o.progressInterval, o.progressInterval > 0],
      ] as const) {
        if (!ok) throw new PolarError("validation", `${k} ${v} is out of range`);
      }
      let template: Record<string, unknown> = {};
      if (o.taskTemplate) {
        try {
          template = JSON.parse(await readFile(o.taskTemplate, "utf8")) as Record<string, unknown>;
        } catch (err) {
          throw new ValidationError("task template", [{ path: o.taskTemplate, message: (err as Error).message }]);
        }
      }
      const instances = await readInstances(file);
      const client = await PolarClient.connect({ nats: await resolveNatsUrl(o.nats) });
      const abort = new AbortController();
      const onSignal = () => abort.abort(new PolarError("cancelled", "interrupted; run the same command again to resume"));
      process.once("SIGINT", onSignal);
      process.once("SIGTERM", onSignal);
      try {
        const r = await runDatagen(client, instances, {
          harness: o.harness,
          samples: o.samples,
          minReward: o.minReward,
          out: o.out,
          concurrency: o.concurrency,
          imageTemplate: o.imageTemplate,
          template,
          signal: abort.signal,
          stream: process.stderr,
          progressIntervalMs: o.progressInterval * 1000,
        });
        process.stdout.write(r.table);
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
        await client.close();
      }
    });
}
