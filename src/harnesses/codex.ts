/**
 * Codex (`codex exec`). OpenAI Responses API at `<proxy>/v1/responses`
 * through a custom model provider in `$CODEX_HOME/config.toml` (the built-in
 * provider ignores OPENAI_BASE_URL and tries WebSockets first). Approvals and
 * Codex's own sandbox are bypassed: the runtime is the sandbox. MCP servers
 * go in `[mcp_servers.<name>]`, skills in `$CODEX_HOME/skills`.
 */
import { z } from "zod";
import { apiBase, baseSettings, headless, homePath, installSkills, modelName, prepareHome, ReasoningEffort, stepEnv } from "./common.ts";
import { codexMcp } from "./mcp.ts";
import { toToml, type TomlTable } from "./toml.ts";
import type { Harness, HarnessContext, HarnessFactory } from "./types.ts";

const PROVIDER = "polar";

const Settings = z.strictObject({
  ...baseSettings,
  /** `model_reasoning_effort`. */
  reasoning_effort: ReasoningEffort.exclude(["max"]).optional(),
  /** `model_reasoning_summary`: auto, concise, detailed or none. */
  reasoning_summary: z.enum(["auto", "concise", "detailed", "none"]).optional(),
  /** Print the JSON event log (`--json`); default true. */
  json: z.boolean().default(true),
  /** Extra top-level config.toml keys (merged over the adapter's). */
  config: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).default({}),
});
type Settings = z.infer<typeof Settings>;

export const codexHarnessFactory: HarnessFactory = {
  name: "codex",
  configSchema: Settings,
  create(config, { agent }): Harness {
    const s = config as Settings;
    const bin = s.bin ?? "codex";
    const model = modelName(agent, s);
    const mcp = codexMcp(agent.mcp_servers); // validates transports at creation
    const codexHome = (ctx: HarnessContext) => homePath(ctx, ".codex");
    return {
      name: "codex",
      async setup(ctx) {
        await prepareHome(ctx, bin, [codexHome(ctx)]);
        await ctx.runtime.writeFile(homePath(ctx, ".codex", "config.toml"), configToml(ctx, s, model, mcp), 0o600);
        await installSkills(ctx, agent, homePath(ctx, ".codex", "skills"));
      },
      steps(instruction, ctx) {
        const args = ["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--model", model];
        if (s.json) args.push("--json");
        return [
          {
            command: headless(bin, [...args, ...s.extra_args], ["--", instruction]),
            env: stepEnv(agent, {}, { CODEX_HOME: codexHome(ctx), OPENAI_API_KEY: ctx.credential, POLAR_API_KEY: ctx.credential }),
          },
        ];
      },
    };
  },
};

export function configToml(ctx: HarnessContext, s: Settings, model: string, mcp: Record<string, TomlTable>): string {
  const table: TomlTable = {
    model,
    model_provider: PROVIDER,
    model_reasoning_effort: s.reasoning_effort,
    model_reasoning_summary: s.reasoning_summary,
    approval_policy: "never",
    sandbox_mode: "danger-full-access",
    check_for_update_on_startup: false,
    ...s.config,
    model_providers: {
      [PROVIDER]: {
        name: "polar proxy",
        base_url: apiBase(ctx, "/v1"),
        env_key: "POLAR_API_KEY",
        wire_api: "responses",
        supports_websockets: false,
      },
    },
    analytics: { enabled: false },
    feedback: { enabled: false },
    features: { plugins: false, remote_plugin: false },
    mcp_servers: Object.keys(mcp).length ? mcp : undefined,
  };
  return toToml(table);
}
