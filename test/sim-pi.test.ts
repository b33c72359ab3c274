/**
 * End to end with a real harness: the pi CLI (from the tools cache) talks to
 * the capturing proxy, which forwards to the sim with the demo playbook. The
 * playbook's shell command runs through pi's bash tool and changes a file;
 * the captured records carry the sim's exact prompt and sampled token ids.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CompletionRecord } from "../src/protocol/schemas.ts";
import { startProxy, type ProxyHandle } from "../src/proxy/index.ts";
import { startSim, type SimHandle } from "../src/sim/server.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";
import { toolBin } from "../src/tools/paths.ts";
import { silentLogger } from "../src/util/log.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const PLAYBOOK = fileURLToPath(new URL("../config/playbooks/demo.json", import.meta.url));
const CREDENTIAL = "sim-pi-session-credential";
const MODEL = "Qwen/Qwen3-8B";

let sim: SimHandle;
let proxy: ProxyHandle;
const records: CompletionRecord[] = [];
const root = mkdtempSync(join(tmpdir(), "sim-pi-"));

beforeAll(async () => {
  sim = await startSim({ playbookPath: PLAYBOOK });
  const session = { sessionId: "s-pi", taskId: "t-pi", attempt: 1, metadata: {}, active: true };
  proxy = await startProxy(
    { sessions: { lookup: (c) => (c === CREDENTIAL ? session : undefined) }, sink: { record: async (_id, r) => void records.push(r) }, log: silentLogger() },
    { host: "127.0.0.1", port: 0, upstreams: [sim.url], flavor: "vllm", modelServed: MODEL, maxBodyBytes: 16 << 20, upstreamTimeoutMs: 60_000 },
  );
});

afterAll(async () => {
  await proxy?.stop();
  await sim?.stop();
  rmSync(root, { recursive: true, force: true });
});

function runPi(cwd: string, home: string, prompt: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const bin = toolBin("pi");
  if (!existsSync(bin)) throw new Error(`pi is not installed at ${bin}: run \`polar tools install pi\``);
  return new Promise((resolve, reject) => {
    const child = spawn(bin, ["--provider", "sim", "--model", MODEL, "--no-session", "--offline", "-p", prompt], {
      cwd,
      env: { PATH: process.env.PATH, HOME: home, POLAR_API_KEY: CREDENTIAL, PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1", PI_TELEMETRY: "0" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe("sim driven by the pi CLI through the proxy", () => {
  it("runs the playbook's command, which changes a file, with token-faithful captures", { timeout: 150_000 }, async () => {
    const work = join(root, "work");
    const home = join(root, "home");
    mkdirSync(work);
    mkdirSync(join(home, ".pi", "agent"), { recursive: true });
    writeFileSync(join(work, "notes.txt"), "status: old\n");
    writeFileSync(
      join(home, ".pi", "agent", "models.json"),
      JSON.stringify({ providers: { sim: { baseUrl: `${proxy.url}/v1`, api: "openai-completions", apiKey: "POLAR_API_KEY", models: [{ id: MODEL }] } } }),
    );
    const r = await runPi(work, home, "Run the shell command `sed -i s/old/new/ notes.txt` in the current directory, then reply with done.");
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(work, "notes.txt"), "utf8")).toBe("status: new\n");
    expect(r.stdout).toContain("done");

    expect(records).toHaveLength(2);
    const tok = qwen3Tokenizer();
    const [first, second] = records.map((x) => ({ req: x.request as Json, res: x.response as Json }));
    for (const { req, res } of [first, second]) {
      // The sim rendered exactly what the Qwen3 template gives for the forwarded request.
      expect(res.prompt_token_ids).toEqual(tok.tokenizeChat(req.messages, { tools: req.tools }));
      expect(res.choices[0].token_ids.at(-1)).toBe(151645);
      expect(res.choices[0].logprobs.content).toHaveLength(res.choices[0].token_ids.length);
    }
    expect(first.req.tools.map((t: Json) => t.function.name)).toContain("bash");
    expect(tok.decode(first.res.choices[0].token_ids)).toContain('<tool_call>\n{"name": "bash", "arguments": {"command": "sed -i s/old/new/ notes.txt"}}\n</tool_call><|im_end|>');
    expect(second.res.choices[0].message.content).toBe("\n\ndone");
    // The second prompt holds the first call's output, re-rendered by the template.
    expect(tok.decode(second.res.prompt_token_ids)).toContain('{"name": "bash", "arguments": {"command": "sed -i s/old/new/ notes.txt"}}');
  });
});
