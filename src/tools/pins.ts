/**
 * Pinned harness CLI versions. Each was checked to install from the npm
 * registry and run on Node 20 (`<bin> --version`). Names are the harness
 * names of the registry, so `polar tools install codex pi` reads naturally.
 */

export interface ToolPin {
  /** Harness name (also the name `polar tools install` takes). */
  readonly name: string;
  readonly pkg: string;
  readonly version: string;
  /** The executable the package puts in `node_modules/.bin`. */
  readonly bin: string;
}

export const TOOL_PINS: readonly ToolPin[] = Object.freeze([
  { name: "claude_code", pkg: "@anthropic-ai/claude-code", version: "2.1.197", bin: "claude" },
  { name: "codex", pkg: "@openai/codex", version: "0.171.0", bin: "codex" },
  { name: "gemini_cli", pkg: "@google/gemini-cli", version: "0.61.0", bin: "gemini" },
  { name: "qwen_code", pkg: "@qwen-code/qwen-code", version: "0.15.10", bin: "qwen" },
  { name: "opencode", pkg: "opencode-ai", version: "1.18.33", bin: "opencode" },
  { name: "pi", pkg: "@mariozechner/pi-coding-agent", version: "0.73.1", bin: "pi" },
]);

/** Looks a pin up by harness name, binary name or package name. */
export function findPin(name: string, pins: readonly ToolPin[] = TOOL_PINS): ToolPin | undefined {
  return pins.find((p) => p.name === name || p.bin === name || p.pkg === name);
}
