/**
 * `agent.mcp_servers` in each CLI's own configuration shape. Transports a
 * CLI cannot speak are refused rather than dropped.
 */
import { PolarError } from "../protocol/errors.ts";
import type { MCPServerSpec } from "../protocol/schemas.ts";
import type { TomlTable } from "./toml.ts";

type Json = Record<string, unknown>;

function byName(servers: readonly MCPServerSpec[], f: (s: MCPServerSpec) => Json): Record<string, Json> {
  return Object.fromEntries(servers.map((s) => [s.name, f(s)]));
}

/** Claude Code `--mcp-config` file: `{mcpServers: {name: {type, command, args} | {type, url}}}`. */
export function claudeMcp(servers: readonly MCPServerSpec[]): Json {
  return {
    mcpServers: byName(servers, (s) =>
      s.transport === "stdio"
        ? { type: "stdio", command: s.command, args: s.args }
        : { type: s.transport === "sse" ? "sse" : "http", url: s.url },
    ),
  };
}

/** Gemini CLI and Qwen Code `settings.json` `mcpServers`: `url` is SSE, `httpUrl` streamable HTTP. */
export function geminiMcp(servers: readonly MCPServerSpec[]): Record<string, Json> {
  return byName(servers, (s) => {
    if (s.transport === "stdio") return { command: s.command, args: s.args, trust: true };
    return s.transport === "sse" ? { url: s.url, trust: true } : { httpUrl: s.url, trust: true };
  });
}

/** OpenCode `mcp`: `{type:"local", command:[...]}` or `{type:"remote", url}`. */
export function opencodeMcp(servers: readonly MCPServerSpec[]): Record<string, Json> {
  return byName(servers, (s) =>
    s.transport === "stdio"
      ? { type: "local", command: [s.command as string, ...s.args], enabled: true }
      : { type: "remote", url: s.url, enabled: true },
  );
}

/** Codex `config.toml` tables `[mcp_servers.<name>]`; Codex has no SSE client. */
export function codexMcp(servers: readonly MCPServerSpec[]): Record<string, TomlTable> {
  return Object.fromEntries(
    servers.map((s): [string, TomlTable] => {
      if (s.transport === "stdio") return [s.name, { command: s.command as string, args: s.args }];
      if (s.transport === "sse") throw new PolarError("validation", `codex cannot use the sse MCP transport (server ${s.name}); use streamable-http`);
      return [s.name, { url: s.url as string }];
    }),
  );
}
