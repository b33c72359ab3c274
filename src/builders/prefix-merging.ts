import { PolarError } from "../protocol/errors.ts";
import type { Factory } from "../util/registry.ts";
import { PrefixMergingConfig } from "./prefix-merging-config.ts";
import type { BuilderDeps, TrajectoryBuilder } from "./types.ts";

export const prefixMergingFactory: Factory<TrajectoryBuilder, BuilderDeps, typeof PrefixMergingConfig> = {
  name: "prefix_merging",
  configSchema: PrefixMergingConfig,
  create: () => ({
    name: "prefix_merging",
    build: () => {
      throw new PolarError("builder", "prefix_merging is being implemented");
    },
  }),
};
