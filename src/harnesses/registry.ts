/**
 * The harness registry: one factory per supported CLI plus `shell`. Created
 * at start-up and passed down; resolved with
 * `{strategy: agent.harness, config: agent.settings}`.
 */
import { Registry } from "../util/registry.ts";
import { claudeCodeHarnessFactory } from "./claude-code.ts";
import { codexHarnessFactory } from "./codex.ts";
import { geminiCliHarnessFactory } from "./gemini-cli.ts";
import { opencodeHarnessFactory } from "./opencode.ts";
import { piHarnessFactory } from "./pi.ts";
import { qwenCodeHarnessFactory } from "./qwen-code.ts";
import { shellHarnessFactory } from "./shell.ts";
import type { Harness, HarnessDeps } from "./types.ts";

export function createHarnessRegistry(): Registry<Harness, HarnessDeps> {
  return new Registry<Harness, HarnessDeps>("harness", [
    claudeCodeHarnessFactory,
    codexHarnessFactory,
    geminiCliHarnessFactory,
    qwenCodeHarnessFactory,
    opencodeHarnessFactory,
    piHarnessFactory,
    shellHarnessFactory,
  ]);
}
