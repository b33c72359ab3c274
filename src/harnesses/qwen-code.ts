/**
 * Qwen Code (`qwen`). OpenAI Chat Completions at `<proxy>/v1/chat/completions`
 * (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL). Settings in
 * `$HOME/.qwen/settings.json` (auth type openai, no usage statistics, no
 * telemetry, no auto-update, MCP servers); skills in `$HOME/.qwen/skills`.
 * `--approval-mode yolo` is required: without it the shell and edit tools are
 * not even offered to the model.
 */
import { z } from "zod";
import { apiBase, baseSettings, headless, homePath, installSkills, modelName, prepareHome, stepEnv, writeJson } from "./common.ts";
import { geminiMcp } from "./mcp.ts";
import type { Harness, HarnessContext, HarnessFactory } from "./types.ts";

const Settings = z.strictObject({
  ...baseSettings,
  max_turns: z.number().int().positive().optional(),
  output_format: z.enum(["text", "json", "stream-json"]).default("text"),
  append_system_prompt: z.string().optional(),
});
type Settings = z.infer<typeof Settings>;

export const qwenCodeHarnessFactory: HarnessFactory = {
  name: "qwen_code",
  configSchema: Settings,
  create(config, { agent }): Harness {
    const s = config as Settings;
    const bin = s.bin ?? "qwen";
    const model = modelName(agent, s);
    const dir = (ctx: HarnessContext) => homePath(ctx, ".qwen");
    return {
      name: "qwen_code",
      async setup(ctx) {
        await prepareHome(ctx, bin, [dir(ctx)]);
        await writeJson(ctx, homePath(ctx, ".qwen", "settings.json"), settingsJson(s, agent.mcp_servers.length ? geminiMcp(agent.mcp_servers) : undefined));
        await installSkills(ctx, agent, homePath(ctx, ".qwen", "skills"));
      },
      steps(instruction, ctx) {
        const args = ["--approval-mode", "yolo", "--auth-type", "openai", "--output-format", s.output_format, "--model", model];
        if (s.max_turns !== undefined) args.push("--max-session-turns", String(s.max_turns));
        if (s.append_system_prompt !== undefined) args.push("--append-system-prompt", s.append_system_prompt);
        // No relaunch: the CLI would start a second Node process only to raise its heap limit.
        const env = stepEnv(agent, { OPENAI_MODEL: model, QWEN_CODE_NO_RELAUNCH: "true" }, { OPENAI_BASE_URL: apiBase(ctx, "/v1"), OPENAI_API_KEY: ctx.credential });
        // Qwen Code takes no positional prompt after "--"; stdin is read as the prompt in headless mode.
        return [{ command: headless(bin, [...args, ...s.extra_args], [], instruction), env }];
      },
    };
  },
};

export function settingsJson(s: Settings, mcpServers?: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {
    security: { auth: { selectedType: "openai" }, folderTrust: { enabled: false } },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false, logPrompts: false },
    general: { enableAutoUpdate: false, disableAutoUpdate: true, disableUpdateNag: true },
    ui: { hideBanner: true, hideTips: true },
  };
  if (s.max_turns !== undefined) out.model = { maxSessionTurns: s.max_turns };
  if (mcpServers) out.mcpServers = mcpServers;
  return out;
}
