import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { normalizeSession } from "../src/builders/normalize.ts";
import { ValidationError } from "../src/protocol/errors.ts";
import { hashSeed, lp } from "./builder-fixtures.ts";

const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));
const EOT = 151645;
const P1 = [151644, 872, 198, 1, 2, EOT, 198, 151644, 77091, 198];
const P2 = [...P1, 300, EOT, 198, 151644, 872, 198, 3, EOT, 198, 151644, 77091, 198];
const P3 = [...P2, 500, 501, EOT, 198, 151644, 872, 198, 4, EOT, 198, 151644, 77091, 198];

/** A session as the reference stores it: no seq, timestamps, ids wherever each engine put them. */
const referenceSession = () => ({
  session_id: "ref-1",
  created_at: "2026-01-01T00:00:00+00:00",
  task_id: "t",
  model_requested: "m",
  model_used: "m",
  api_type: "openai",
  metadata: { group_id: "g7", policy_version: 2 },
  completions: [
    {
      // SGLang: prompt ids on the choice, ids and logprobs only in meta_info.
      completion_id: "msg_b",
      timestamp: "2026-01-01T00:00:02.000002+00:00",
      request: { messages: [{ role: "user", content: "x" }] },
      response: {
        choices: [
          {
            prompt_token_ids: P2,
            finish_reason: "length",
            message: { role: "assistant", content: "y" },
            meta_info: { output_token_logprobs: [[lp(1, 0), 500, "a"], { token_id: 501, token_logprob: lp(1, 1) }] },
          },
        ],
      },
      metadata: null,
    },
    {
      // vLLM: prompt ids at the top level, token_ids and logprobs.content on the choice.
      completion_id: "msg_a",
      timestamp: "2026-01-01T00:00:01.000001+00:00",
      request: { messages: [{ role: "user", content: "x" }] },
      original_request: null,
      response: {
        prompt_token_ids: P1,
        choices: [
          {
            token_ids: [300, EOT],
            finish_reason: "tool_calls",
            message: { role: "assistant", content: "z" },
            logprobs: { content: [{ token: "a", token_id: 300, logprob: lp(2, 0) }, { token: "b", token_id: EOT, logprob: lp(2, 1) }] },
          },
        ],
      },
      metadata: { session_id: "ref-1" },
    },
    {
      completion_id: "msg_c",
      timestamp: "2026-01-01T00:00:03+00:00",
      request: {},
      response: {
        choices: [
          { input_token_ids: P3, token_ids: [700, EOT], finish_reason: "stop", logprobs: { content: [{ token: "token_id:700", logprob: lp(3, 0) }, { token: "token_id:151645", logprob: lp(3, 1) }] } },
        ],
      },
    },
  ],
});

describe("normalizeSession", () => {
  it("accepts the reference's JSON shape and orders by time", () => {
    const s = normalizeSession(referenceSession());
    expect(s.completions.map((c) => c.completion_id)).toEqual(["msg_a", "msg_b", "msg_c"]);
    expect(s.completions[1].metadata).toEqual({});
    expect(s.completions[0].original_request).toEqual({});
    expect(s.completion_count).toBe(3);
  });

  it("unwraps a SessionResult and names bad fields", () => {
    const s = normalizeSession({ trajectory: {}, completion_session: referenceSession() });
    expect(s.session_id).toBe("ref-1");
    expect(() => normalizeSession({ completions: [{ request: {}, response: {} }] })).toThrow(ValidationError);
    expect(() => normalizeSession({ completions: [{ request: {}, response: {} }] })).toThrow(/session_id.*completions\.0\.completion_id|completions\.0\.completion_id/);
    expect(() => normalizeSession([])).toThrow(/must be a JSON object/);
  });
});

describe("polar build / polar verify (real processes)", () => {
  let dir: string;
  const bin = fileURLToPath(new URL("../bin/polar.js", import.meta.url));
  const polar = (...args: string[]) =>
    run(process.execPath, [bin, ...args], { cwd: root, maxBuffer: 64 << 20 })
      .then((r) => ({ code: 0, ...r }))
      .catch((e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }));

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "polar-builder-cli-"));
    await writeFile(join(dir, "session.json"), JSON.stringify(referenceSession()));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("rebuilds a reference-shaped session with prefix_merging and proves it", async () => {
    const r = await polar("build", "--strategy", "prefix_merging", "--config", JSON.stringify({ end_of_turn_token_id: EOT }), join(dir, "session.json"));
    expect(r.stderr).toBe("");
    const t = JSON.parse(r.stdout);
    expect(t.traces).toHaveLength(1);
    expect(t.traces[0].metadata.completion_ids).toEqual(["msg_a", "msg_b", "msg_c"]);
    expect(t.traces[0].response_ids).toEqual([300, EOT, ...P2.slice(P1.length + 2), 500, 501, ...P3.slice(P2.length + 2), 700, EOT]);
    expect(t.traces[0].response_logprobs.filter((_: number, i: number) => t.traces[0].loss_mask[i] === 1)).toEqual([
      lp(2, 0), lp(2, 1), lp(1, 0), lp(1, 1), lp(3, 0), lp(3, 1),
    ]);
    expect(t.metadata).toMatchObject({ builder: "prefix_merging", group_id: "g7", policy_version: 2, trace_count: 1 });

    await writeFile(join(dir, "result.json"), JSON.stringify({ session_id: "ref-1", trajectory: t, completion_session: referenceSession() }));
    const ok = await polar("verify", join(dir, "result.json"));
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ ok: true, errors: [], stats: { completions_trainable: 3, sampled_tokens_trainable: 6 } });

    t.traces[0].response_logprobs[0] = -0.5;
    await writeFile(join(dir, "bad.json"), JSON.stringify(t));
    const bad = await polar("verify", join(dir, "bad.json"), "--session", join(dir, "session.json"));
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stdout).errors).toEqual([`trace 0: response position 0: logprob -0.5 is not msg_a's ${lp(2, 0)} (#0)`]);
  });

  it("rebuilds with per_request and rejects an unknown strategy", async () => {
    const r = await polar("build", "--strategy", "per_request", "--compact", join(dir, "session.json"));
    const t = JSON.parse(r.stdout);
    expect(t.traces.map((x: { response_ids: number[] }) => x.response_ids)).toEqual([[300, EOT], [500, 501], [700, EOT]]);
    const u = await polar("build", "--strategy", "nope", join(dir, "session.json"));
    expect(u.code).not.toBe(0);
    expect(u.stderr).toContain('polar: unknown_strategy: unknown builder "nope"; known: per_request, prefix_merging');
    const c = await polar("build", "--strategy", "prefix_merging", "--config", '{"tokenizer":"gpt2"}', join(dir, "session.json"));
    expect(c.code).toBe(1);
    expect(c.stderr).toContain("config.tokenizer");
  });
});
void hashSeed;
