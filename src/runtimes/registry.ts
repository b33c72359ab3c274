/**
 * The runtime registry: `local`, `docker`, `apptainer`. The registry's own
 * config is unused (pass {}); the RuntimeSpec and RuntimeContext come in deps.
 * The docker client is created on first use unless one is given.
 */
import type Dockerode from "dockerode";
import type { RuntimeSpec } from "../protocol/schemas.ts";
import { Registry } from "../util/registry.ts";
import { apptainerRuntimeFactory } from "./apptainer.ts";
import { dockerRuntimeFactory } from "./docker.ts";
import { localRuntimeFactory } from "./local.ts";
import type { Runtime, RuntimeContext } from "./types.ts";

export function createRuntimeRegistry(opts: { docker?: Dockerode } = {}): Registry<Runtime, { spec: RuntimeSpec; ctx: RuntimeContext }> {
  return new Registry<Runtime, { spec: RuntimeSpec; ctx: RuntimeContext }>("runtime", [localRuntimeFactory, dockerRuntimeFactory(opts.docker), apptainerRuntimeFactory]);
}
