/**
 * The runtime registry: `local`, `docker`, `apptainer`. The registry's own
 * config is unused (pass {}); the RuntimeSpec and RuntimeContext come in deps.
 */
import type { RuntimeSpec } from "../protocol/schemas.ts";
import { Registry } from "../util/registry.ts";
import { localRuntimeFactory } from "./local.ts";
import type { Runtime, RuntimeContext } from "./types.ts";

export function createRuntimeRegistry(): Registry<Runtime, { spec: RuntimeSpec; ctx: RuntimeContext }> {
  return new Registry<Runtime, { spec: RuntimeSpec; ctx: RuntimeContext }>("runtime", [localRuntimeFactory]);
}
