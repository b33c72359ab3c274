/**
 * A harness adapter prepares an unmodified agent CLI to run in a runtime
 * against the capturing proxy: it writes the CLI's config files into the
 * agent's HOME, sets its environment, and returns the headless command(s).
 */
import type { AgentSpec, ExecInput } from "../protocol/schemas.ts";
import type { Runtime } from "../runtimes/types.ts";
import type { Factory } from "../util/registry.ts";

export interface HarnessContext {
  runtime: Runtime;
  /** Proxy base URL as seen from inside the runtime, without a path (e.g. http://127.0.0.1:PORT). */
  proxyUrl: string;
  /** The session credential: every API key the harness sends. */
  credential: string;
  sessionId: string;
  taskId: string;
  /** The environment every step gets (proxy contract, runtime env, agent env). */
  env: Record<string, string>;
  /** Host directories `agent.skills_path` may be uploaded from (undefined: not checked here). */
  uploadRoots?: readonly string[];
}

export interface HarnessStep {
  command: string;
  env?: Record<string, string>;
  cwd?: string;
}

export interface Harness {
  readonly name: string;
  /** Writes config files and checks the CLI is there; rejects with code `harness`. */
  setup(ctx: HarnessContext): Promise<void>;
  /** The commands to run, in order; the instruction must be safely quoted. */
  steps(instruction: string, ctx: HarnessContext): HarnessStep[];
  /** Best-effort commands after build and evaluation. */
  postrunSteps?(ctx: HarnessContext): HarnessStep[];
}

export interface HarnessDeps {
  agent: AgentSpec;
}

export type HarnessFactory = Factory<Harness, HarnessDeps>;

export type { ExecInput };
