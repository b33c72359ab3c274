/**
 * Gemini CLI (`gemini -p`). Google Generative Language API at
 * `<proxy>/v1beta/models/M:streamGenerateContent?alt=sse`, key in
 * `x-goog-api-key`. Settings in `$HOME/.gemini/settings.json` (auth type,
 * no usage statistics, no telemetry, no auto-update, MCP servers); skills in
 * `$HOME/.gemini/skills`. Without a model (`auto_model: true`) the CLI first
 * makes its own non-streaming model-router call, a side call the proxy captures.
 */
import { z } from "zod";
import { apiBase, baseSettings, googleModelId, headless, homePath, installSkills, modelName, prepareHome, stepEnv, writeJson } from "./common.ts";
import { geminiMcp } from "./mcp.ts";
import type { Harness, HarnessContext, HarnessFactory } from "./types.ts";

const Settings = z.strictObject({
  ...baseSettings,
  /** `model.maxSessionTurns` in settings.json. */
  max_turns: z.number().int().positive().optional(),
  /** Let the CLI pick the model with its router call instead of pinning one. */
  auto_model: z.boolean().default(false),
  output_format: z.enum(["text", "json", "stream-json"]).default("text"),
  /** Gemini CLI's own sandbox (off: the runtime is the sandbox). */
  sandbox: z.boolean().default(false),
});
type Settings = z.infer<typeof Settings>;

export const geminiCliHarnessFactory: HarnessFactory = {
  name: "gemini_cli",
  configSchema: Settings,
  create(config, { agent }): Harness {
    const s = config as Settings;
    const bin = s.bin ?? "gemini";
    const model = s.auto_model ? undefined : googleModelId(modelName(agent, s));
    const dir = (ctx: HarnessContext) => homePath(ctx, ".gemini");
    return {
      name: "gemini_cli",
      async setup(ctx) {
        await prepareHome(ctx, bin, [dir(ctx)]);
        await writeJson(ctx, homePath(ctx, ".gemini", "settings.json"), settingsJson(s, agent.mcp_servers.length ? geminiMcp(agent.mcp_servers) : undefined));
        await installSkills(ctx, agent, homePath(ctx, ".gemini", "skills"));
      },
      steps(instruction, ctx) {
        const args = ["--approval-mode", "yolo", "--output-format", s.output_format];
        if (model) args.push("--model", model);
        if (s.sandbox) args.push("--sandbox");
        // No relaunch: the CLI would start a second Node process only to raise its heap limit.
        const defaults: Record<string, string> = { GEMINI_CLI_TRUST_WORKSPACE: "true", GEMINI_CLI_NO_RELAUNCH: "true" };
        if (model) defaults.GEMINI_MODEL = model;
        const env = stepEnv(agent, defaults, { GEMINI_API_KEY: ctx.credential, GOOGLE_API_KEY: ctx.credential, GOOGLE_GEMINI_BASE_URL: apiBase(ctx) });
        // `--prompt=<text>` keeps an instruction that starts with "-" from being read as a flag.
        return [{ command: headless(bin, [...args, ...s.extra_args], [`--prompt=${instruction}`]), env }];
      },
    };
  },
};

export function settingsJson(s: Settings, mcpServers?: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {
    security: { auth: { selectedType: "gemini-api-key" }, folderTrust: { enabled: false } },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false, logPrompts: false },
    general: { enableAutoUpdate: false, enableAutoUpdateNotification: false, disableAutoUpdate: true, disableUpdateNag: true },
    ui: { hideBanner: true, hideTips: true },
  };
  if (s.max_turns !== undefined) out.model = { maxSessionTurns: s.max_turns };
  if (mcpServers) out.mcpServers = mcpServers;
  return out;
}
