/**
 * pi (`pi -p`). The API is the provider's `api` in `$HOME/.pi/agent/models.json`:
 * `chat` → openai-completions (`/v1/chat/completions`), `responses` →
 * openai-responses (`/v1/responses`), `anthropic` → anthropic-messages
 * (`/v1/messages`), `google` → google-generative-ai
 * (`/v1beta/models/M:streamGenerateContent`). pi has no MCP client (refused);
 * skills go in `$HOME/.pi/agent/skills`. PI_OFFLINE=1 stops its startup calls.
 */
import { z } from "zod";
import { apiBase, baseSettings, googleModelId, headless, homePath, installSkills, modelName, prepareHome, refuseMcp, stepEnv, writeJson } from "./common.ts";
import type { Harness, HarnessContext, HarnessFactory } from "./types.ts";

const PROVIDER = "polar";

export const PI_APIS = {
  chat: { api: "openai-completions", path: "/v1" },
  responses: { api: "openai-responses", path: "/v1" },
  anthropic: { api: "anthropic-messages", path: "" },
  google: { api: "google-generative-ai", path: "/v1beta" },
} as const;

const Settings = z.strictObject({
  ...baseSettings,
  api: z.enum(["chat", "responses", "anthropic", "google"]).default("chat"),
  /** `--thinking`: off, minimal, low, medium, high or xhigh. */
  reasoning_effort: z.enum(["off", "minimal", "low", "medium", "high", "xhigh"]).optional(),
  context_window: z.number().int().positive().default(262_144),
  max_tokens: z.number().int().positive().default(8192),
  /** pi's per-provider `compat` switches, passed through. */
  compat: z.record(z.string(), z.unknown()).optional(),
  /**
   * `--mode json` prints the event log, but pi then exits 0 even when the
   * model call failed; the default text mode exits 1 on a failed turn.
   */
  json: z.boolean().default(false),
});
type Settings = z.infer<typeof Settings>;

export const piHarnessFactory: HarnessFactory = {
  name: "pi",
  configSchema: Settings,
  create(config, { agent }): Harness {
    const s = config as Settings;
    refuseMcp(agent, "pi");
    const bin = s.bin ?? "pi";
    const model = s.api === "google" ? googleModelId(modelName(agent, s)) : modelName(agent, s);
    return {
      name: "pi",
      async setup(ctx) {
        await prepareHome(ctx, bin, [homePath(ctx, ".pi", "agent")]);
        await writeJson(ctx, homePath(ctx, ".pi", "agent", "models.json"), modelsJson(ctx, s, model));
        await installSkills(ctx, agent, homePath(ctx, ".pi", "agent", "skills"));
      },
      steps(instruction, ctx) {
        const args = ["--provider", PROVIDER, "--model", model, "--no-session", "--offline"];
        if (s.json) args.push("--mode", "json");
        if (s.reasoning_effort) args.push("--thinking", s.reasoning_effort);
        const env = stepEnv(agent, { PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1", PI_TELEMETRY: "0" }, { POLAR_API_KEY: ctx.credential });
        // pi reads an argument starting with "-" or "@" as a flag or a file: the instruction goes in on stdin.
        return [{ command: headless(bin, [...args, ...s.extra_args, "-p"], [], instruction), env }];
      },
    };
  },
};

export function modelsJson(ctx: HarnessContext, s: Settings, model: string): Record<string, unknown> {
  const { api, path } = PI_APIS[s.api];
  return {
    providers: {
      [PROVIDER]: {
        baseUrl: apiBase(ctx, path),
        api,
        apiKey: "POLAR_API_KEY",
        ...(s.compat ? { compat: s.compat } : {}),
        models: [{ id: model, name: model, contextWindow: s.context_window, maxTokens: s.max_tokens, reasoning: s.reasoning_effort !== undefined && s.reasoning_effort !== "off" }],
      },
    },
  };
}
