/**
 * The Claude Code example on the default `polar up` (the sim at Qwen3's
 * native 40,960-token context, no --max-model-len): Claude Code asks for
 * 32,000 output tokens on a ~19,000-token prompt; the proxy lowers the
 * request to what the context leaves, so the session completes instead of
 * failing on its first call. Real CLI, real process, real sim.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnPolar, within } from "./helpers/cli-process.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "polar-cc-up-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("Claude Code on the default polar up", () => {
  it("runs config/tasks/sum-claude-code.json with its output request clamped to the engine's context", async () => {
    const example = JSON.parse(await readFile(new URL("../config/tasks/sum-claude-code.json", import.meta.url), "utf8"));
    const taskFile = join(dir, "task.json");
    await writeFile(taskFile, JSON.stringify({ ...example, task_id: "cc-default-up", num_samples: 1 }));
    const out = join(dir, "traces.jsonl");
    const up = spawnPolar(["up", "--http-port", "0", "--playbook", "config/playbooks/demo.json", "--run", taskFile, "--out", out], { POLAR_STATE_FILE: join(dir, "up.json") });
    try {
      expect(await within(up.exited, 240_000, "polar up --run")).toBe(0);
    } finally {
      up.signal("SIGKILL", true);
    }
    expect(up.output()).toMatch(/task cc-default-up: completed/);
    expect(up.output()).toMatch(/ses-\S+\s+COMPLETED\s+1\s/);
    const traces = (await readFile(out, "utf8")).trim().split("\n").map((l) => JSON.parse(l));
    expect(traces.length).toBeGreaterThanOrEqual(1);
    type Clamp = { fields: string[]; original: number; clamped: number; prompt_tokens: number; max_model_len: number };
    const clamps = traces.flatMap((t) => (t.trace.metadata.completion_metadata as Array<{ output_tokens_clamp?: Clamp }>).map((m) => m.output_tokens_clamp)).filter((c): c is Clamp => !!c);
    // Claude Code's policy calls ask 32,000 tokens; each was lowered to exactly the room its prompt left.
    expect(clamps.length).toBeGreaterThanOrEqual(1);
    for (const c of clamps) {
      expect(c).toMatchObject({ fields: ["max_tokens"], original: 32_000, max_model_len: 40_960 });
      expect(c.prompt_tokens).toBeGreaterThan(15_000);
      expect(c.clamped).toBe(40_960 - c.prompt_tokens);
    }
  }, 300_000);
});
