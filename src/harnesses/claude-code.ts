/**
 * Claude Code (`claude -p`). Anthropic Messages API at `<proxy>/v1/messages`,
 * key in `x-api-key`. Config lives in `$HOME/.claude` (CLAUDE_CONFIG_DIR);
 * MCP servers go in a file passed with `--mcp-config`, skills in
 * `$CLAUDE_CONFIG_DIR/skills`. Non-essential traffic (bootstrap, status, MCP
 * registry, title generation) is off unless `nonessential_traffic` is set;
 * what remains goes to the proxy only.
 */
import { z } from "zod";
import type { AgentSpec } from "../protocol/schemas.ts";
import { apiBase, baseSettings, headless, homePath, installSkills, modelName, prepareHome, stepEnv, writeJson } from "./common.ts";
import { claudeMcp } from "./mcp.ts";
import type { Harness, HarnessContext, HarnessFactory } from "./types.ts";

const Settings = z.strictObject({
  ...baseSettings,
  max_turns: z.number().int().positive().optional(),
  /** `--effort`: low, medium, high, xhigh or max. */
  reasoning_effort: z.enum(["low", "medium", "high", "xhigh", "max"]).optional(),
  max_thinking_tokens: z.number().int().min(0).optional(),
  append_system_prompt: z.string().optional(),
  allowed_tools: z.array(z.string()).optional(),
  disallowed_tools: z.array(z.string()).optional(),
  /** Let the CLI make its side calls (title generation and the like), all through the proxy. */
  nonessential_traffic: z.boolean().default(false),
  /** `stream-json` (default) prints the event log; `text` only the final answer. */
  output_format: z.enum(["stream-json", "json", "text"]).default("stream-json"),
});
type Settings = z.infer<typeof Settings>;

export const claudeCodeHarnessFactory: HarnessFactory = {
  name: "claude_code",
  configSchema: Settings,
  create(config, { agent }): Harness {
    const s = config as Settings;
    const bin = s.bin ?? "claude";
    const model = modelName(agent, s);
    const configDir = (ctx: HarnessContext) => homePath(ctx, ".claude");
    const mcpFile = (ctx: HarnessContext) => homePath(ctx, ".claude", "polar-mcp.json");
    return {
      name: "claude_code",
      async setup(ctx) {
        await prepareHome(ctx, bin, [configDir(ctx)]);
        if (agent.mcp_servers.length) await writeJson(ctx, mcpFile(ctx), claudeMcp(agent.mcp_servers));
        await installSkills(ctx, agent, homePath(ctx, ".claude", "skills"));
      },
      steps(instruction, ctx) {
        const args = ["-p", "--dangerously-skip-permissions", "--model", model, "--output-format", s.output_format];
        if (s.output_format === "stream-json") args.push("--verbose");
        if (s.max_turns !== undefined) args.push("--max-turns", String(s.max_turns));
        if (s.reasoning_effort) args.push("--effort", s.reasoning_effort);
        if (s.append_system_prompt !== undefined) args.push("--append-system-prompt", s.append_system_prompt);
        if (s.allowed_tools?.length) args.push("--allowed-tools", ...s.allowed_tools);
        if (s.disallowed_tools?.length) args.push("--disallowed-tools", ...s.disallowed_tools);
        if (agent.mcp_servers.length) args.push("--mcp-config", mcpFile(ctx), "--strict-mcp-config");
        return [{ command: headless(bin, [...args, ...s.extra_args], ["--", instruction]), env: env(ctx, agent, s, model) }];
      },
    };
  },
};

function env(ctx: HarnessContext, agent: AgentSpec, s: Settings, model: string): Record<string, string> {
  const e: Record<string, string> = {
    ANTHROPIC_MODEL: model,
    ANTHROPIC_SMALL_FAST_MODEL: model,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
    ANTHROPIC_DEFAULT_SONNET_MODEL: model,
    ANTHROPIC_DEFAULT_OPUS_MODEL: model,
    CLAUDE_CODE_SUBAGENT_MODEL: model,
    // Running as root (typical in containers) needs this with --dangerously-skip-permissions.
    IS_SANDBOX: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_ERROR_REPORTING: "1",
    DISABLE_BUG_COMMAND: "1",
    CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY: "1",
    CLAUDE_CODE_DISABLE_TERMINAL_TITLE: "1",
    CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL: "1",
  };
  if (!s.nonessential_traffic) e.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1";
  if (s.max_thinking_tokens !== undefined) e.MAX_THINKING_TOKENS = String(s.max_thinking_tokens);
  return stepEnv(agent, e, {
    CLAUDE_CONFIG_DIR: homePath(ctx, ".claude"),
    ANTHROPIC_BASE_URL: apiBase(ctx),
    ANTHROPIC_API_KEY: ctx.credential,
  });
}
