/**
 * Each real harness CLI, unmodified, through the whole system: supervisor,
 * gateway, capturing proxy, the sim following a playbook, the local runtime
 * (bubblewrap with a private network whose only way out is the proxy's Unix
 * socket). The CLIs run concurrently. Each one must run the playbook's two
 * shell commands (the second reads what the first wrote), finish COMPLETED,
 * and leave a trajectory whose every call carries the sim's own prompt and
 * response ids, recorded under the harness's own API type. Every connect()
 * the CLI's process tree makes is recorded with strace and must go to the
 * gateway.
 */
import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { request } from "../src/nats/messages.ts";
import type { CompletionRecord, SessionResult } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { installTools } from "../src/tools/install.ts";
import { toolsDir } from "../src/tools/paths.ts";
import { findPin } from "../src/tools/pins.ts";
import {
  expectEveryCallInTrajectory, expectOnlyGateway, expectRecordsFromSim, parseConnects, readSessionFile, traceOf, waitTask, writeConnectShim, writePlaybook,
} from "./harness-e2e-helpers.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

interface Case {
  id: string;
  harness: string;
  settings?: Record<string, unknown>;
  api: "anthropic" | "openai_responses" | "google" | "openai_chat";
  /** The kind of side call this harness makes on its own, if any. */
  side?: string;
  /** The CLI has no MCP client (the adapter refuses MCP servers). */
  noMcp?: boolean;
}

const MCP_SERVER = fileURLToPath(new URL("./harness-mcp-server.mjs", import.meta.url));
const SKILL = "polar-marker-skill";

const CASES: Case[] = [
  { id: "claude", harness: "claude_code", api: "anthropic" },
  { id: "codex", harness: "codex", api: "openai_responses" },
  // Gemini CLI sends a turn's reasoning back only as the thoughtSignature, which the proxy decodes.
  { id: "gemini", harness: "gemini_cli", api: "google" },
  // No pinned model: the CLI first asks a flash-lite "router" for a JSON complexity score.
  { id: "gemini_auto", harness: "gemini_cli", settings: { auto_model: true }, api: "google", side: "router" },
  { id: "qwen", harness: "qwen_code", api: "openai_chat" },
  { id: "opencode_chat", harness: "opencode", settings: { api: "chat" }, api: "openai_chat", side: "title" },
  { id: "opencode_responses", harness: "opencode", settings: { api: "responses" }, api: "openai_responses", side: "title" },
  { id: "opencode_anthropic", harness: "opencode", settings: { api: "anthropic" }, api: "anthropic", side: "title" },
  { id: "pi_chat", harness: "pi", settings: { api: "chat" }, api: "openai_chat", noMcp: true },
  { id: "pi_responses", harness: "pi", settings: { api: "responses" }, api: "openai_responses", noMcp: true },
  { id: "pi_anthropic", harness: "pi", settings: { api: "anthropic" }, api: "anthropic", noMcp: true },
  { id: "pi_google", harness: "pi", settings: { api: "google" }, api: "google", noMcp: true },
];

const TOOLS = toolsDir();
let sys: TestSystem;
let root: string;
let workRoot: string;
let proxyPort: number;

beforeAll(async () => {
  if (spawnSync("strace", ["-V"]).status !== 0) throw new Error("the harness tests record connects with strace: install it (Debian package strace)");
  // Idempotent: a no-op when the pinned CLIs are already in the cache (CI installs them first).
  await installTools({ names: [...new Set(CASES.map((c) => c.harness))] });
  root = await mkdtemp(join(tmpdir(), "polar-e2e-"));
  workRoot = join(root, "work");
  await mkdir(join(root, "skills", SKILL), { recursive: true });
  await writeFile(join(root, "skills", SKILL, "SKILL.md"), `---\nname: ${SKILL}\ndescription: Use when asked about polar markers.\n---\n\nSay "marker".\n`);
  // Claude Code's system prompt and 24 tools come to ~50k tokens: serve a 128k context like Qwen3 with YaRN.
  sys = await startTestSystem({ playbookPath: await writePlaybook(root), maxModelLen: 131_072 });
  // The skills folder and the connect shims are uploaded from this test's directory.
  await sys.startSupervisor({ uploadRoots: [root] });
  const gw = await sys.startGateway({
    nodeId: "gw-harness-e2e",
    uploadRoots: [root],
    toolsDir: TOOLS,
    workRoot,
    keepSessionDirs: true,
    limits: { maxInitWorkers: 16, maxRunWorkers: 16, maxPostrunWorkers: 8 },
  });
  proxyPort = Number(new URL(gw.proxyUrl).port);
}, 600_000);

afterAll(async () => {
  await sys?.stop();
  if (root && !process.env.POLAR_E2E_KEEP) await rm(root, { recursive: true, force: true });
});

/** Gemini CLI's own check of the router's answer (ClassifierResponseSchema). */
const ROUTER_ANSWER = z.object({ complexity_reasoning: z.string(), complexity_score: z.number().min(1).max(100) });

/**
 * The model-router side calls: non-streaming generateContent with a JSON
 * schema that reached the engine as response_format, each answered (first
 * try, no retry) with JSON the CLI accepts, each alone in its own side trace.
 */
function expectRouterCalls(r: SessionResult, side: CompletionRecord[]): void {
  expect(side.length).toBeGreaterThanOrEqual(1);
  for (const x of side) {
    expect(x.metadata.side_kind).toBe("router");
    expect(x.metadata.model_requested).toMatch(/flash-lite/);
    expect((x.request as { stream?: boolean }).stream ?? false).toBe(false);
    const format = (x.request as { response_format?: { type: string; json_schema: { schema: { required: string[] } } } }).response_format;
    expect(format?.type).toBe("json_schema");
    expect(format?.json_schema.schema.required).toEqual(["complexity_reasoning", "complexity_score"]);
    const content = String((x.response as { choices: { message: { content: string } }[] }).choices[0].message.content);
    expect(ROUTER_ANSWER.safeParse(JSON.parse(content)).success, content).toBe(true);
    const t = r.trajectory.traces[traceOf(r, x.completion_id)];
    expect(t.metadata.completion_role).toBe("side");
    expect(side.filter((y) => traceOf(r, y.completion_id) === traceOf(r, x.completion_id))).toEqual([x]);
  }
  // Every router answer was valid, so the CLI never retried one (a retry re-sends the same prompt).
  const prompts = side.map((x) => JSON.stringify((x.response as { prompt_token_ids: number[] }).prompt_token_ids));
  expect(new Set(prompts).size).toBe(prompts.length);
  // The main conversation is one chain whose start only carries a label from the router's chain
  // ("diverged_from_tip" with just the template's opening tokens in common), not a split.
  type Start = { completion_id: string; chain: number; reason: string; nearest_chain?: number; common_prefix?: number };
  const stats = r.trajectory.metadata.reconstruction_stats as { chain_starts: Start[]; chains_total: number };
  const policy = r.completion_session!.completions.filter((x) => x.metadata.completion_role !== "side");
  const starts = new Map(stats.chain_starts.map((st) => [st.completion_id, st]));
  expect(policy.slice(1).filter((x) => starts.has(x.completion_id))).toEqual([]);
  expect(stats.chains_total).toBe(side.length + 1);
  const first = starts.get(policy[0].completion_id)!;
  expect(first.reason).toBe("diverged_from_tip");
  expect(side.map((x) => starts.get(x.completion_id)?.chain)).toContain(first.nearest_chain);
  expect(first.common_prefix).toBeLessThan(8);
  // An invalid answer would have cost five retries with backoff (~100 s).
  expect(r.timing.agent_exec_ms).toBeLessThan(60_000);
}

async function runTask(task: Record<string, unknown>, timeoutMs: number): Promise<SessionResult> {
  await request(sys.client, SUBJECTS.api.submit, task);
  const st = await waitTask(sys, task.task_id as string, timeoutMs);
  expect(st.results).toHaveLength(1);
  return st.results[0];
}

describe.concurrent("harnesses end to end (local runtime)", () => {
  for (const c of CASES) {
    it(`${c.id}: runs the playbook, completes, and every call is in the trajectory as ${c.api}`, async () => {
      const bin = findPin(c.harness)!.bin;
      const shim = await writeConnectShim(join(root, "shims", c.id), bin);
      const tag = `tag_${c.id}`;
      // Shell metacharacters, quotes, a newline and a leading dash: it must reach the model byte for byte.
      const instruction = `-E2E-TASK ${tag}: follow the steps you're given; don't "stop" before $HOME/\`e2e\` is written.\nThat's all.`;
      const r = await runTask(
        {
          task_id: `e2e-${c.id.replaceAll("_", "-")}`,
          instruction,
          timeout_seconds: 240,
          runtime: { backend: "local", prepare: [{ type: "upload_file", source: shim, target: `.netcheck/${bin}` }] },
          agent: {
            harness: c.harness,
            model_name: "Qwen/Qwen3-8B",
            settings: { ...c.settings, bin: `./.netcheck/${bin}` },
            mcp_servers: c.noMcp ? [] : [{ name: "probe", transport: "stdio", command: "node", args: [MCP_SERVER] }],
            skills_path: join(root, "skills"),
          },
          builder: { strategy: "prefix_merging" },
          evaluator: { strategy: "session_completed" },
        },
        240_000,
      );
      const logs = r.agent_result?.metadata;
      expect(r.status, `${r.error}\n${JSON.stringify(logs)}`).toBe("COMPLETED");
      expect(r.agent_result?.status).toBe("completed");
      expect(r.timing.agent_exec_ms).toBeGreaterThan(0);
      // The CLI's output log, with the final answer the sim gave it, is in the result and on disk.
      expect(String(r.agent_result?.metadata.stdout_tail)).toContain("e2e/second.txt is written");
      expect(await readFile(join(workRoot, `${r.session_id}.a${r.attempt}`, "logs", "agent", "step.00.stdout.log"), "utf8")).toContain("e2e/second.txt is written");

      // The playbook's commands ran in the workspace, the second on the first one's output.
      expect(await readSessionFile(workRoot, r, "e2e/first.txt")).toBe(`${tag}\n`);
      expect(await readSessionFile(workRoot, r, "e2e/second.txt")).toBe(`${tag.toUpperCase()}\n`);

      // Every captured call, in the harness's own API, with the sim's ids.
      const records = r.completion_session!.completions;
      expect(records.every((x) => x.api_type === c.api)).toBe(true);
      expect(r.completion_session!.api_type).toBe(c.api);
      const policy = records.filter((x) => x.metadata.completion_role !== "side");
      const side = records.filter((x) => x.metadata.completion_role === "side");
      expect(policy.length).toBeGreaterThanOrEqual(3);
      if (c.side) expect(side.map((x) => x.metadata.side_kind)).toContain(c.side);
      else expect(side).toEqual([]);
      expectRecordsFromSim(sys, r);
      expectEveryCallInTrajectory(r);
      expect(JSON.stringify(policy[0].request.messages)).toContain(JSON.stringify(instruction).slice(1, -1));
      // The MCP server's tool and the skill were registered: the CLI offers them to the model.
      const sent = JSON.stringify(policy[0].original_request);
      if (!c.noMcp) expect(sent).toContain("polarmarker_echo");
      expect(sent).toContain(SKILL);
      // Under prefix_merging the agent loop is one chain, one trace; side calls stay out of it.
      const main = traceOf(r, policy[0].completion_id);
      expect(policy.map((x) => traceOf(r, x.completion_id))).toEqual(policy.map(() => main));
      for (const x of side) {
        const t = r.trajectory.traces[traceOf(r, x.completion_id)];
        expect(traceOf(r, x.completion_id)).not.toBe(main);
        expect(t.metadata.completion_role).toBe("side");
      }
      if (c.side === "router") expectRouterCalls(r, side);
      expect(r.trajectory.traces[main].loss_mask.filter((m) => m === 1).length).toBeGreaterThan(0);

      // Nothing but the gateway was contacted.
      const log = await readSessionFile(workRoot, r, `.netcheck/connect.log`);
      expectOnlyGateway(parseConnects(log), proxyPort);
    }, 300_000);
  }

  it("a harness that hangs is killed at its agent budget and its captured calls become a partial trajectory", async () => {
    const started = Date.now();
    const r = await runTask(
      {
        task_id: "e2e-hang",
        instruction: "E2E-HANG tag_hang: do the work.",
        timeout_seconds: 120,
        // Long enough for pi to start and run its first command on a loaded machine (a CI run
        // at 12 s killed it before that command ran), short enough to keep the test quick.
        metadata: { agent_timeout: 30 },
        runtime: { backend: "local" },
        agent: { harness: "pi", model_name: "Qwen/Qwen3-8B", settings: { api: "chat" } },
        builder: { strategy: "per_request" },
        evaluator: { strategy: "session_completed" },
      },
      120_000,
    );
    expect(r.status).toBe("TIMEOUT");
    expect(r.agent_result).toMatchObject({ status: "timeout", return_code: -1, metadata: { timeout_source: "agent", timeout_stage: "exec" } });
    expect(Date.now() - started).toBeLessThan(90_000);
    // The agent budget (30 s) counts from the harness's setup: setup and exec together used it up.
    expect(r.timing.agent_setup_ms + r.timing.agent_exec_ms).toBeGreaterThanOrEqual(29_500);
    expect(r.timing.agent_exec_ms).toBeGreaterThan(5_000);
    // The first command ran; the second (sleep 600) was the one killed.
    expect(await readSessionFile(workRoot, r, "e2e/started.txt")).toBe("tag_hang\n");
    const records = r.completion_session!.completions;
    expect(records).toHaveLength(2);
    expect(r.trajectory.traces).toHaveLength(2);
    expectRecordsFromSim(sys, r);
    expectEveryCallInTrajectory(r);
  }, 150_000);
});
