/** What every session attempt of a gateway shares. */
import type { Logger } from "pino";
import type { RuntimeSpec } from "../../protocol/schemas.ts";
import type { EventKind } from "../../protocol/subjects.ts";
import type { BuilderDeps, TrajectoryBuilder } from "../../builders/types.ts";
import type { Evaluator } from "../../evaluators/types.ts";
import type { Harness, HarnessDeps } from "../../harnesses/types.ts";
import type { Runtime, RuntimeContext } from "../../runtimes/types.ts";
import type { Registry } from "../../util/registry.ts";
import type { CaptureRegistry } from "./capture.ts";
import type { RemoteEvaluator } from "./remote-eval.ts";
import type { SessionBindings } from "./proxy-binding.ts";

export interface GatewayRegistries {
  builders: Registry<TrajectoryBuilder, BuilderDeps>;
  runtimes: Registry<Runtime, { spec: RuntimeSpec; ctx: RuntimeContext }>;
  harnesses: Registry<Harness, HarnessDeps>;
  evaluators: Registry<Evaluator, Record<string, never>>;
}

export interface GatewayContext {
  nodeId: string;
  log: Logger;
  registries: GatewayRegistries;
  capture: CaptureRegistry;
  proxyEndpoint: RuntimeContext["proxy"];
  /** Each attempt's own proxy socket and where its credential may be used from. */
  bindings: SessionBindings;
  defaultRuntime: unknown;
  workRoot: string;
  toolsDir?: string;
  keepSessionDirs: boolean;
  /** Host directories uploads (prepare, skills) may come from. */
  uploadRoots: readonly string[];
  /** Operator secrets every agent gets in its environment (redacted wherever output is kept). */
  secretEnv: Readonly<Record<string, string>>;
  /** Evaluator actors of the gateway's pool, reached through POLAR_EVALS (for remote evaluators). */
  remoteEval?: RemoteEvaluator;
  builderDeps(): BuilderDeps;
  emit(kind: EventKind, body: unknown): void;
  /** The policy version in force now (the proxy gate's). */
  policyVersion(): number;
}
