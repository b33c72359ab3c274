/** Trajectory builders: the registry, the built-in builders, the normalizer and the verifier. */
export type { BuilderDeps, BuilderFactory, TrajectoryBuilder } from "./types.ts";
export { createBuilderRegistry, BUILTIN_BUILDERS } from "./registry.ts";
export { normalizeSession } from "./normalize.ts";
export { orderCompletions } from "./order.ts";
export { buildPerRequest, perRequestBuilder } from "./per-request.ts";
export { buildPrefixMerging, prefixMergingBuilder, PrefixMergingConfig } from "./prefix-merging.ts";
export { verifyTrajectory, type VerifyReport, type VerifyStats } from "./verify.ts";
export type { ReconstructionStats, ChainEvent } from "./trajectory.ts";
export type { EotResolution } from "./eot.ts";
