/**
 * The builder registry: `per_request` and `prefix_merging`, plus whatever a
 * caller registers (`registry.register(factory)`); each config is validated by
 * the builder's own strict schema before the builder is created.
 */
import { Registry } from "../util/registry.ts";
import { perRequestFactory } from "./per-request.ts";
import { prefixMergingFactory } from "./prefix-merging.ts";
import type { BuilderDeps, BuilderFactory, TrajectoryBuilder } from "./types.ts";

export const BUILTIN_BUILDERS: readonly BuilderFactory[] = [perRequestFactory as BuilderFactory, prefixMergingFactory as BuilderFactory];

export function createBuilderRegistry(): Registry<TrajectoryBuilder, BuilderDeps> {
  return new Registry<TrajectoryBuilder, BuilderDeps>("builder", BUILTIN_BUILDERS);
}
