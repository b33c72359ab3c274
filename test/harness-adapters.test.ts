/**
 * What each adapter writes into the agent's HOME and which command it runs.
 * The commands are executed for real by bash against a stand-in binary that
 * prints its argv, stdin and environment, so quoting is checked end to end.
 */
import { chmod, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createHarnessRegistry } from "../src/harnesses/registry.ts";
import { proxyEnv } from "../src/harnesses/env.ts";
import type { Harness, HarnessContext } from "../src/harnesses/types.ts";
import { AgentSpec } from "../src/protocol/schemas.ts";
import { fakeRuntime, type FakeRuntime } from "./harness-fake-runtime.ts";

const CRED = "sk-polar-unit-0001";
const NASTY = `-x 'quoted' "double" $HOME \`id\` ; rm -rf / \n second line \\ end @file`;

let runtimes: FakeRuntime[] = [];
afterEach(async () => {
  await Promise.all(runtimes.map((r) => r.stop()));
  runtimes = [];
});

interface Probe {
  argv: string[];
  stdin: string;
  env: Record<string, string>;
}

/** A stand-in CLI that dumps what it was given as JSON. */
async function standIn(rt: FakeRuntime): Promise<string> {
  const bin = join(rt.root, "stand-in");
  await writeFile(
    bin,
    `#!${process.execPath}\nconst fs=require("fs");let stdin="";try{stdin=fs.readFileSync(0,"utf8")}catch{}\nprocess.stdout.write(JSON.stringify({argv:process.argv.slice(2),stdin,env:process.env}));\n`,
  );
  await chmod(bin, 0o755);
  return bin;
}

async function prepare(harness: string, agent: Record<string, unknown> = {}, settings: Record<string, unknown> = {}) {
  const rt = await fakeRuntime("http://127.0.0.1:4555");
  runtimes.push(rt);
  const bin = await standIn(rt);
  const spec = AgentSpec.parse({ harness, model_name: "Qwen/Qwen3-8B", ...agent, settings: { bin, ...settings } });
  const h: Harness = createHarnessRegistry().resolve({ strategy: harness, config: spec.settings }, { agent: spec });
  const ctx: HarnessContext = {
    runtime: rt,
    proxyUrl: rt.proxyUrl,
    credential: CRED,
    sessionId: "sess-1",
    taskId: "task-1",
    env: { ...proxyEnv({ proxyUrl: rt.proxyUrl, credential: CRED, sessionId: "sess-1", taskId: "task-1" }), HTTPS_PROXY: "http://10.9.9.9:3128", HTTP_PROXY: "http://10.9.9.9:3128" },
  };
  await h.setup(ctx);
  return { rt, h, ctx, bin };
}

async function run(p: Awaited<ReturnType<typeof prepare>>, instruction = NASTY): Promise<Probe> {
  const steps = p.h.steps(instruction, p.ctx);
  expect(steps).toHaveLength(1);
  const r = await p.rt.exec(steps[0].command, { env: { ...p.ctx.env, ...steps[0].env }, cwd: steps[0].cwd });
  expect(r.exitCode, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Probe;
}

const home = (rt: FakeRuntime, ...p: string[]) => join(rt.home, ...p);
const readJson = async (path: string) => JSON.parse(await readFile(path, "utf8"));

describe("harness registry", () => {
  it("knows the six CLIs and shell", () => {
    expect(createHarnessRegistry().names()).toEqual(["claude_code", "codex", "gemini_cli", "opencode", "pi", "qwen_code", "shell"]);
  });

  it("validates settings with each adapter's strict schema", () => {
    const r = createHarnessRegistry();
    expect(() => r.check({ strategy: "codex", config: { max_trns: 3 } })).toThrow(/max_trns/);
    expect(() => r.check({ strategy: "pi", config: { api: "soap" } })).toThrow(/config\.api/);
    expect(r.check({ strategy: "opencode", config: { api: "anthropic", max_turns: 4 } })).toMatchObject({ api: "anthropic", max_turns: 4 });
  });

  it("refuses MCP servers pi cannot use and transports codex cannot speak", () => {
    const r = createHarnessRegistry();
    const mcp = [{ name: "m", transport: "sse", url: "http://127.0.0.1:1/sse" }];
    const pi = AgentSpec.parse({ harness: "pi", mcp_servers: mcp });
    expect(() => r.resolve({ strategy: "pi", config: {} }, { agent: pi })).toThrow(/does not support MCP/);
    const codex = AgentSpec.parse({ harness: "codex", mcp_servers: mcp });
    expect(() => r.resolve({ strategy: "codex", config: {} }, { agent: codex })).toThrow(/sse MCP transport/);
  });
});

describe("every adapter", () => {
  for (const name of ["claude_code", "codex", "gemini_cli", "qwen_code", "opencode", "pi"]) {
    it(`${name}: passes the instruction through unchanged and unsets proxies`, async () => {
      const p = await prepare(name);
      const got = await run(p);
      const delivered = got.stdin !== "" ? got.stdin : got.argv.at(-1)!.replace(/^--prompt=/, "");
      expect(delivered).toBe(NASTY);
      expect(got.env.HTTPS_PROXY).toBeUndefined();
      expect(got.env.HTTP_PROXY).toBeUndefined();
      expect(got.env.NO_PROXY).toContain("127.0.0.1");
      expect(p.rt.execs[0].command).toMatch(/mkdir -p .* && command -v /);
    });
  }

  it("fails setup with a harness error when the CLI is missing", async () => {
    const rt = await fakeRuntime();
    runtimes.push(rt);
    const agent = AgentSpec.parse({ harness: "codex", settings: { bin: "no-such-codex-binary" } });
    const h = createHarnessRegistry().resolve({ strategy: "codex", config: agent.settings }, { agent });
    const ctx = { runtime: rt, proxyUrl: rt.proxyUrl, credential: CRED, sessionId: "s", taskId: "t", env: {} };
    await expect(h.setup(ctx)).rejects.toMatchObject({ code: "harness", message: expect.stringMatching(/no-such-codex-binary not found/) });
  });
});

describe("claude_code", () => {
  it("points the Anthropic API at the proxy, skips permissions, keeps quiet, registers MCP", async () => {
    const mcp = [
      { name: "files", transport: "stdio", command: "mcp-files", args: ["--root", "/w"] },
      { name: "web", transport: "streamable-http", url: "http://127.0.0.1:7000/mcp" },
    ];
    const p = await prepare("claude_code", { mcp_servers: mcp }, { max_turns: 7, reasoning_effort: "high", allowed_tools: ["Bash", "Edit"] });
    const got = await run(p, "do it");
    expect(got.argv).toEqual([
      "-p", "--dangerously-skip-permissions", "--model", "Qwen/Qwen3-8B", "--output-format", "stream-json", "--verbose",
      "--max-turns", "7", "--effort", "high", "--allowed-tools", "Bash", "Edit",
      "--mcp-config", home(p.rt, ".claude", "polar-mcp.json"), "--strict-mcp-config", "--", "do it",
    ]);
    expect(got.env).toMatchObject({
      ANTHROPIC_BASE_URL: "http://127.0.0.1:4555", ANTHROPIC_API_KEY: CRED, ANTHROPIC_MODEL: "Qwen/Qwen3-8B",
      ANTHROPIC_DEFAULT_HAIKU_MODEL: "Qwen/Qwen3-8B", CLAUDE_CONFIG_DIR: home(p.rt, ".claude"), IS_SANDBOX: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", DISABLE_TELEMETRY: "1", DISABLE_AUTOUPDATER: "1",
    });
    expect(await readJson(home(p.rt, ".claude", "polar-mcp.json"))).toEqual({
      mcpServers: { files: { type: "stdio", command: "mcp-files", args: ["--root", "/w"] }, web: { type: "http", url: "http://127.0.0.1:7000/mcp" } },
    });
  });

  it("lets agent.env override quiet defaults but never where the API is or the credential", async () => {
    const p = await prepare("claude_code", { env: { DISABLE_TELEMETRY: "0", ANTHROPIC_BASE_URL: "http://10.0.0.1", ANTHROPIC_API_KEY: "other" } });
    const got = await run(p, "x");
    expect(got.env).toMatchObject({ DISABLE_TELEMETRY: "0", ANTHROPIC_BASE_URL: "http://127.0.0.1:4555", ANTHROPIC_API_KEY: CRED });
  });

  it("lets the side calls through when nonessential traffic is asked for", async () => {
    const p = await prepare("claude_code", {}, { nonessential_traffic: true, output_format: "text" });
    const got = await run(p, "x");
    expect(got.env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC).toBeUndefined();
    expect(got.argv).not.toContain("--verbose");
  });
});

describe("codex", () => {
  it("writes a Responses provider at the proxy and bypasses approvals", async () => {
    const p = await prepare("codex", { mcp_servers: [{ name: "fs", transport: "stdio", command: "mcp-fs", args: ["-v"] }] }, { reasoning_effort: "low" });
    const got = await run(p, "go");
    expect(got.argv).toEqual(["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--model", "Qwen/Qwen3-8B", "--json", "--", "go"]);
    expect(got.env).toMatchObject({ CODEX_HOME: home(p.rt, ".codex"), POLAR_API_KEY: CRED });
    const toml = await readFile(home(p.rt, ".codex", "config.toml"), "utf8");
    expect(toml).toContain('model = "Qwen/Qwen3-8B"\nmodel_provider = "polar"\nmodel_reasoning_effort = "low"');
    expect(toml).toContain('[model_providers.polar]\nname = "polar proxy"\nbase_url = "http://127.0.0.1:4555/v1"\nenv_key = "POLAR_API_KEY"\nwire_api = "responses"');
    expect(toml).toContain("[analytics]\nenabled = false");
    expect(toml).toContain("[features]\nplugins = false\nremote_plugin = false");
    expect(toml).toContain('[mcp_servers.fs]\ncommand = "mcp-fs"\nargs = ["-v"]');
    expect(toml).toContain("check_for_update_on_startup = false");
  });
});

describe("gemini_cli", () => {
  it("sets the Google base URL and key, yolo approvals, quiet settings", async () => {
    const p = await prepare("gemini_cli", { mcp_servers: [{ name: "w", transport: "sse", url: "http://127.0.0.1:7/sse" }] }, { max_turns: 9 });
    const got = await run(p, "go");
    // Google model ids hold no "/": the URL would not name one model.
    expect(got.argv).toEqual(["--approval-mode", "yolo", "--output-format", "text", "--model", "Qwen-Qwen3-8B", "--prompt=go"]);
    expect(got.env).toMatchObject({ GOOGLE_GEMINI_BASE_URL: "http://127.0.0.1:4555", GEMINI_API_KEY: CRED, GEMINI_MODEL: "Qwen-Qwen3-8B", GEMINI_CLI_TRUST_WORKSPACE: "true" });
    const s = await readJson(home(p.rt, ".gemini", "settings.json"));
    expect(s).toMatchObject({
      security: { auth: { selectedType: "gemini-api-key" } },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
      model: { maxSessionTurns: 9 },
      mcpServers: { w: { url: "http://127.0.0.1:7/sse", trust: true } },
    });
  });

  it("leaves the model to the CLI's router when auto_model is set", async () => {
    const p = await prepare("gemini_cli", {}, { auto_model: true });
    const got = await run(p, "go");
    expect(got.argv).not.toContain("--model");
    expect(got.env.GEMINI_MODEL).toBeUndefined();
  });
});

describe("qwen_code", () => {
  it("uses Chat Completions at the proxy with yolo approvals; the prompt goes in on stdin", async () => {
    const p = await prepare("qwen_code", { model_name: null }, { max_turns: 3 });
    const got = await run(p, "go");
    expect(got.argv).toEqual(["--approval-mode", "yolo", "--auth-type", "openai", "--output-format", "text", "--model", "polar-policy", "--max-session-turns", "3"]);
    expect(got.stdin).toBe("go");
    expect(got.env).toMatchObject({ OPENAI_BASE_URL: "http://127.0.0.1:4555/v1", OPENAI_API_KEY: CRED, OPENAI_MODEL: "polar-policy" });
    expect(await readJson(home(p.rt, ".qwen", "settings.json"))).toMatchObject({
      security: { auth: { selectedType: "openai" } },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      general: { enableAutoUpdate: false },
    });
  });
});

describe("opencode", () => {
  for (const [api, npm] of [["chat", "@ai-sdk/openai-compatible"], ["responses", "@ai-sdk/openai"], ["anthropic", "@ai-sdk/anthropic"]] as const) {
    it(`api ${api}: provider ${npm} at the proxy, every permission allowed`, async () => {
      const p = await prepare("opencode", {}, { api, max_turns: 5 });
      const got = await run(p, "go");
      expect(got.argv).toEqual(["run", "--pure", "--model", "polar/Qwen/Qwen3-8B", "--format", "json"]);
      expect(got.stdin).toBe("go");
      expect(got.env).toMatchObject({ POLAR_API_KEY: CRED, OPENCODE_DISABLE_AUTOUPDATE: "1", OPENCODE_DISABLE_MODELS_FETCH: "1", OPENCODE_DISABLE_DEFAULT_PLUGINS: "1" });
      const cfg = await readJson(home(p.rt, ".config", "opencode", "opencode.json"));
      expect(cfg.provider.polar).toMatchObject({ npm, options: { baseURL: "http://127.0.0.1:4555/v1", apiKey: "{env:POLAR_API_KEY}" } });
      expect(Object.keys(cfg.provider.polar.models)).toEqual(["Qwen/Qwen3-8B"]);
      expect(cfg).toMatchObject({ model: "polar/Qwen/Qwen3-8B", small_model: "polar/Qwen/Qwen3-8B", autoupdate: false, share: "disabled", agent: { build: { steps: 5 } } });
      expect(cfg.permission.bash).toBe("allow");
      expect(cfg.permission.edit).toBe("allow");
    });
  }
});

describe("pi", () => {
  for (const [api, piApi, base] of [
    ["chat", "openai-completions", "http://127.0.0.1:4555/v1"],
    ["responses", "openai-responses", "http://127.0.0.1:4555/v1"],
    ["anthropic", "anthropic-messages", "http://127.0.0.1:4555"],
    ["google", "google-generative-ai", "http://127.0.0.1:4555/v1beta"],
  ] as const) {
    it(`api ${api}: models.json provider ${piApi} at ${base}`, async () => {
      const p = await prepare("pi", {}, { api, reasoning_effort: "high" });
      const got = await run(p, "go");
      const id = api === "google" ? "Qwen-Qwen3-8B" : "Qwen/Qwen3-8B";
      expect(got.argv).toEqual(["--provider", "polar", "--model", id, "--no-session", "--offline", "--thinking", "high", "-p"]);
      expect(got.stdin).toBe("go");
      expect(got.env).toMatchObject({ POLAR_API_KEY: CRED, PI_OFFLINE: "1" });
      const m = await readJson(home(p.rt, ".pi", "agent", "models.json"));
      expect(m.providers.polar).toMatchObject({ baseUrl: base, api: piApi, apiKey: "POLAR_API_KEY", models: [{ id, reasoning: true }] });
    });
  }
});

describe("skills", () => {
  it("uploads a host skills folder into each CLI's skills directory", async () => {
    const src = await fakeRuntime();
    runtimes.push(src);
    await src.writeFile(join(src.root, "skills", "greet", "SKILL.md"), "---\nname: greet\n---\nSay hi.\n");
    const where = { claude_code: [".claude", "skills"], codex: [".codex", "skills"], gemini_cli: [".gemini", "skills"], qwen_code: [".qwen", "skills"], opencode: [".config", "opencode", "skills"], pi: [".pi", "agent", "skills"] };
    for (const [name, dir] of Object.entries(where)) {
      const p = await prepare(name, { skills_path: join(src.root, "skills") });
      expect(await readFile(home(p.rt, ...dir, "greet", "SKILL.md"), "utf8")).toContain("Say hi.");
    }
  });
});
