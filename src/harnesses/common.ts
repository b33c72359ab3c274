/**
 * Pieces every CLI adapter shares: settings fields, the model name, the
 * in-sandbox paths under the agent's HOME, the one setup exec that creates
 * config directories and finds the binary, skills, and the headless command.
 */
import { assertUploadAllowed, realish } from "../security/upload-roots.ts";
import { existsSync } from "node:fs";
import { posix } from "node:path";
import { z } from "zod";
import { PolarError } from "../protocol/errors.ts";
import type { AgentSpec } from "../protocol/schemas.ts";
import { shellQuote } from "./env.ts";
import type { HarnessContext } from "./types.ts";

/** Model name sent when neither `settings.model` nor `agent.model_name` is given (the proxy serves its own). */
export const DEFAULT_MODEL = "polar-policy";

/** Settings every CLI adapter accepts. */
export const baseSettings = {
  /** Overrides `agent.model_name`. */
  model: z.string().min(1).optional(),
  /** The CLI to run (a name on PATH or an absolute path); default the pinned CLI's binary. */
  bin: z.string().min(1).optional(),
  /** Extra arguments, appended (each quoted) before the instruction. */
  extra_args: z.array(z.string()).default([]),
};

export const ReasoningEffort = z.enum(["minimal", "low", "medium", "high", "xhigh", "max"]);

/** Proxy variables the CLIs would otherwise honour even for 127.0.0.1 (qwen does, ignoring NO_PROXY). */
const PROXY_VARS = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"];

export function modelName(agent: AgentSpec, settings: { model?: string }): string {
  return settings.model ?? agent.model_name ?? DEFAULT_MODEL;
}

/**
 * A model id usable in a Google API path (`/v1beta/models/<id>:streamGenerateContent`):
 * Google's ids never hold "/" or ":", a Hugging Face name like `Qwen/Qwen3-8B` does.
 * Only the URL changes: the proxy asks the inference server for the session's served model.
 */
export function googleModelId(name: string): string {
  return name.replace(/[/:]/g, "-");
}

/** `base` (no trailing slash) joined with an API path prefix. */
export function apiBase(ctx: HarnessContext, path = ""): string {
  return `${ctx.proxyUrl.replace(/\/+$/, "")}${path}`;
}

export function homePath(ctx: HarnessContext, ...parts: string[]): string {
  return posix.join(ctx.runtime.home, ...parts);
}

/**
 * The headless command: proxies unset, then `bin args... tail...` with every
 * word quoted. `stdin` text, when given, is piped in (for CLIs whose argument
 * parser would misread an instruction that starts with "-").
 */
export function headless(bin: string, args: readonly string[], tail: readonly string[] = [], stdin?: string): string {
  const words = [bin, ...args, ...tail].map(quoteWord).join(" ");
  const pipe = stdin === undefined ? "" : `printf '%s' ${shellQuote(stdin)} | `;
  return `unset ${PROXY_VARS.join(" ")}; ${pipe}exec ${words}`;
}

/** Leaves plain words (flags, names) readable; quotes anything else. */
function quoteWord(w: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : shellQuote(w);
}

/** Env every CLI gets: loopback exempt from any proxy, no colour codes in logs. */
export function commonEnv(): Record<string, string> {
  return { NO_PROXY: "127.0.0.1,localhost,::1", no_proxy: "127.0.0.1,localhost,::1", NO_COLOR: "1", TERM: "dumb" };
}

/**
 * A step's environment. The runtime merges it over the session's (which holds
 * `agent.env`), so `agent.env` is applied again here to override the
 * adapter's `defaults` (quiet and speed settings); `fixed` (where the model
 * API is, the session credential, where the config was written) always wins.
 */
export function stepEnv(agent: AgentSpec, defaults: Record<string, string>, fixed: Record<string, string>): Record<string, string> {
  return { ...commonEnv(), ...defaults, ...agent.env, ...fixed };
}

/**
 * Creates the config directories and checks the CLI is there, in one exec.
 * Rejects with code `harness` naming the missing binary.
 */
export async function prepareHome(ctx: HarnessContext, bin: string, dirs: readonly string[]): Promise<void> {
  const mk = dirs.length ? `mkdir -p ${dirs.map(shellQuote).join(" ")} && ` : "";
  const r = await ctx.runtime.exec(`${mk}command -v ${shellQuote(bin)}`, { env: ctx.env, category: "setup", timeoutMs: 60_000 });
  if (r.exitCode !== 0) {
    const why = r.stderr.trim() || r.stdout.trim();
    throw new PolarError("harness", `${bin} not found in the runtime (install it with \`polar tools install\`)${why ? `: ${why}` : ""}`, {
      details: { bin, exitCode: r.exitCode },
    });
  }
}

export async function writeJson(ctx: HarnessContext, path: string, value: unknown): Promise<void> {
  await ctx.runtime.writeFile(path, `${JSON.stringify(value, null, 2)}\n`, 0o600);
}

/**
 * Puts the agent's skills (a folder of skill folders) at `dest`. A path that
 * exists on this host is uploaded; otherwise it is taken as a path inside the
 * sandbox and copied there.
 */
export async function installSkills(ctx: HarnessContext, agent: AgentSpec, dest: string): Promise<void> {
  const src = agent.skills_path;
  if (!src) return;
  if (existsSync(src)) {
    if (ctx.uploadRoots) assertUploadAllowed(src, ctx.uploadRoots, "agent.skills_path");
    await ctx.runtime.upload(ctx.uploadRoots ? realish(src) : src, dest);
    return;
  }
  const r = await ctx.runtime.exec(`mkdir -p ${shellQuote(dest)} && cp -R ${shellQuote(`${src.replace(/\/+$/, "")}/.`)} ${shellQuote(dest)}`, {
    env: ctx.env,
    category: "setup",
  });
  if (r.exitCode !== 0) throw new PolarError("harness", `skills_path ${src} could not be copied: ${r.stderr.trim()}`);
}

/** Rejects MCP servers for a CLI that has no MCP support, instead of silently dropping them. */
export function refuseMcp(agent: AgentSpec, harness: string): void {
  if (agent.mcp_servers.length) {
    throw new PolarError("validation", `the ${harness} harness does not support MCP servers (agent.mcp_servers)`);
  }
}
