#!/usr/bin/env node
// Generates config/swe/<name>/instance.json (SWE-bench field names),
// config/swe/instances.jsonl and one task per instance, config/tasks/swe-<name>.json
// (the tool agent in the instance's image, graded by swebench_harness in a fresh
// runtime), from each instance's sources:
//   base/   the repository at the base commit
//   gold/   files the gold patch changes (full contents)
//   tests/  files the test patch changes or adds (full contents)
//   meta.json  instance_id, repo, version, created_at, problem_statement,
//              hints_text, FAIL_TO_PASS, PASS_TO_PASS [, test_cmd, log_parser]
// The base commit is made with a fixed author, committer and date (created_at),
// so scripts/swe-images.sh recreates the same commit id inside the image.
//   node scripts/swe-instances.mjs [--check]   (--check: fail if a file would change)
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "config", "swe");
const check = process.argv.includes("--check");

/** The environment the base commit is made with (also used by swe-images.sh). */
export function commitEnv(createdAt) {
  return {
    GIT_AUTHOR_NAME: "polar",
    GIT_AUTHOR_EMAIL: "swe@polar.invalid",
    GIT_COMMITTER_NAME: "polar",
    GIT_COMMITTER_EMAIL: "swe@polar.invalid",
    GIT_AUTHOR_DATE: createdAt,
    GIT_COMMITTER_DATE: createdAt,
  };
}

function git(cwd, args, env = {}) {
  return execFileSync("git", ["-c", "init.defaultBranch=main", "-c", "core.autocrlf=false", ...args], {
    cwd,
    env: { ...process.env, ...env },
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
}

function diffAfterOverlay(dir, overlay, base) {
  cpSync(overlay, dir, { recursive: true });
  git(dir, ["add", "-A"]);
  const diff = git(dir, ["diff", "--cached", "--binary", base]);
  git(dir, ["reset", "-q", "--hard", base]);
  git(dir, ["clean", "-qfdx"]);
  return diff;
}

function build(name) {
  const src = join(ROOT, name);
  const meta = JSON.parse(readFileSync(join(src, "meta.json"), "utf8"));
  const dir = mkdtempSync(join(tmpdir(), "polar-swe-"));
  try {
    cpSync(join(src, "base"), dir, { recursive: true });
    git(dir, ["init", "-q"]);
    git(dir, ["add", "-A"]);
    git(dir, ["commit", "-q", "-m", `${meta.repo} at base`], commitEnv(meta.created_at));
    const base = git(dir, ["rev-parse", "HEAD"]).trim();
    const patch = diffAfterOverlay(dir, join(src, "gold"), base);
    const testPatch = diffAfterOverlay(dir, join(src, "tests"), base);
    const { FAIL_TO_PASS, PASS_TO_PASS, ...rest } = meta;
    return {
      repo: rest.repo,
      instance_id: rest.instance_id,
      base_commit: base,
      patch,
      test_patch: testPatch,
      problem_statement: rest.problem_statement,
      hints_text: rest.hints_text ?? "",
      created_at: rest.created_at,
      version: rest.version,
      FAIL_TO_PASS: JSON.stringify(FAIL_TO_PASS),
      PASS_TO_PASS: JSON.stringify(PASS_TO_PASS),
      environment_setup_commit: base,
      ...(rest.test_cmd ? { test_cmd: rest.test_cmd } : {}),
      ...(rest.log_parser ? { log_parser: rest.log_parser } : {}),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const names = readdirSync(ROOT, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(ROOT, d.name, "meta.json")))
  .map((d) => d.name)
  .sort();
/** The instance as a task: the tool agent fixes it in its image; swebench_harness grades it in a fresh runtime. */
function task(name, inst) {
  return {
    task_id: `swe-${name}`,
    instruction: inst.problem_statement,
    num_samples: 1,
    timeout_seconds: 600,
    runtime: {
      backend: "docker",
      image: `sweb.eval.x86_64.${inst.instance_id.replaceAll("__", "_1776_").toLowerCase()}:latest`,
      workdir: "/testbed",
      network: "none",
      prepare: [{ type: "upload_file", source: "config/examples/tool-agent.py", target: "/tmp/tool-agent.py" }],
      eval_prepare: [],
    },
    agent: { harness: "shell", custom_shell: { command: "python3 /tmp/tool-agent.py" } },
    builder: { strategy: "per_request" },
    evaluator: {
      strategy: "swebench_harness",
      refresh_runtime: true,
      config: {
        instance: inst,
        repo_dir: "/testbed",
        patch_command: "git diff --binary --submodule=diff",
        exclude_patterns: [],
        apply_timeout: 120,
        test_timeout: 600,
      },
    },
  };
}

const outputs = new Map();
const lines = [];
for (const name of names) {
  const inst = build(name);
  outputs.set(join(ROOT, name, "instance.json"), JSON.stringify(inst, null, 2) + "\n");
  outputs.set(join(ROOT, "..", "tasks", `swe-${name}.json`), JSON.stringify(task(name, inst), null, 2) + "\n");
  lines.push(JSON.stringify(inst));
}
outputs.set(join(ROOT, "instances.jsonl"), lines.join("\n") + "\n");
let stale = 0;
for (const [path, text] of outputs) {
  const old = existsSync(path) ? readFileSync(path, "utf8") : "";
  if (old === text) continue;
  stale++;
  if (check) console.error(`swe-instances: ${path} is stale`);
  else writeFileSync(path, text);
}
if (check && stale) process.exit(1);
console.log(`swe-instances: ${names.length} instances${check ? " checked" : " written"}`);
