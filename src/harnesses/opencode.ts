/**
 * OpenCode (`opencode run`). The API follows the provider package set in
 * `$HOME/.config/opencode/opencode.json`: `chat` → @ai-sdk/openai-compatible
 * (`/v1/chat/completions`), `responses` → @ai-sdk/openai (`/v1/responses`),
 * `anthropic` → @ai-sdk/anthropic (`/v1/messages`). Every tool is allowed;
 * MCP servers go in `mcp`, skills in `~/.config/opencode/skills`. The title
 * side call uses the same model (`small_model`) so it reaches the proxy too.
 */
import { z } from "zod";
import { apiBase, baseSettings, headless, homePath, installSkills, modelName, prepareHome, ReasoningEffort, stepEnv, writeJson } from "./common.ts";
import { opencodeMcp } from "./mcp.ts";
import type { Harness, HarnessContext, HarnessFactory } from "./types.ts";

const PROVIDER = "polar";

export const OPENCODE_APIS = {
  chat: "@ai-sdk/openai-compatible",
  responses: "@ai-sdk/openai",
  anthropic: "@ai-sdk/anthropic",
} as const;

const PLUGIN_LOCK = { name: "opencode-config", lockfileVersion: 3, requires: true, packages: { "": { dependencies: { "@opencode-ai/plugin": "*" } } } };

const PERMISSIONS = [
  "read", "edit", "glob", "grep", "list", "bash", "task", "skill", "lsp", "todowrite", "todoread",
  "question", "webfetch", "websearch", "codesearch", "external_directory", "doom_loop",
] as const;

const Settings = z.strictObject({
  ...baseSettings,
  /** Which vendor API the provider speaks. */
  api: z.enum(["chat", "responses", "anthropic"]).default("chat"),
  /** The build agent's step limit (`agent.build.steps`). */
  max_turns: z.number().int().positive().optional(),
  /** Sent as the provider's `reasoningEffort` option (chat and responses). */
  reasoning_effort: ReasoningEffort.exclude(["max"]).optional(),
  /** `--format json` prints the event log. */
  json: z.boolean().default(true),
});
type Settings = z.infer<typeof Settings>;

export const opencodeHarnessFactory: HarnessFactory = {
  name: "opencode",
  configSchema: Settings,
  create(config, { agent }): Harness {
    const s = config as Settings;
    const bin = s.bin ?? "opencode";
    const model = modelName(agent, s);
    const dir = (ctx: HarnessContext) => homePath(ctx, ".config", "opencode");
    return {
      name: "opencode",
      async setup(ctx) {
        await prepareHome(ctx, bin, [dir(ctx), homePath(ctx, ".config", "opencode", "node_modules")]);
        await writeJson(ctx, homePath(ctx, ".config", "opencode", "opencode.json"), opencodeJson(ctx, s, model, agent.mcp_servers.length ? opencodeMcp(agent.mcp_servers) : undefined));
        // OpenCode installs its plugin SDK into every config directory from the npm registry
        // unless node_modules exists and the lock file already lists it; no plugins are used here.
        await writeJson(ctx, homePath(ctx, ".config", "opencode", "package-lock.json"), PLUGIN_LOCK);
        await installSkills(ctx, agent, homePath(ctx, ".config", "opencode", "skills"));
      },
      steps(instruction, ctx) {
        const args = ["run", "--pure", "--model", `${PROVIDER}/${model}`];
        if (s.json) args.push("--format", "json");
        const env = stepEnv(agent, {
          OPENCODE_DISABLE_AUTOUPDATE: "1",
          OPENCODE_DISABLE_MODELS_FETCH: "1",
          OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
          OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
          OPENCODE_DISABLE_SHARE: "1",
          OPENCODE_DISABLE_EMBEDDED_WEB_UI: "1",
          OPENCODE_DISABLE_CLAUDE_CODE: "1",
          OPENCODE_DISABLE_TERMINAL_TITLE: "1",
          OPENCODE_PURE: "1",
        }, { POLAR_API_KEY: ctx.credential });
        // Positional words are re-joined by OpenCode, quoting any with a space: stdin keeps the text as it is.
        return [{ command: headless(bin, [...args, ...s.extra_args], [], instruction), env }];
      },
    };
  },
};

export function opencodeJson(ctx: HarnessContext, s: Settings, model: string, mcp?: Record<string, unknown>): Record<string, unknown> {
  const modelOptions = s.reasoning_effort && s.api !== "anthropic" ? { reasoningEffort: s.reasoning_effort } : undefined;
  const out: Record<string, unknown> = {
    provider: {
      [PROVIDER]: {
        npm: OPENCODE_APIS[s.api],
        name: "polar proxy",
        options: { baseURL: apiBase(ctx, "/v1"), apiKey: "{env:POLAR_API_KEY}" },
        models: { [model]: { name: model, tool_call: true, ...(modelOptions ? { options: modelOptions } : {}) } },
      },
    },
    model: `${PROVIDER}/${model}`,
    small_model: `${PROVIDER}/${model}`,
    autoupdate: false,
    share: "disabled",
    permission: Object.fromEntries(PERMISSIONS.map((p) => [p, "allow"])),
  };
  if (s.max_turns !== undefined) out.agent = { build: { steps: s.max_turns } };
  if (mcp) out.mcp = mcp;
  return out;
}
