/** The SWE-style instances of config/swe and their images (built by scripts/swe-images.sh). */
import { readFileSync } from "node:fs";
import Dockerode from "dockerode";
import { instanceImageName } from "../../src/evaluators/swebench/instance.ts";

export const SWE_NAMES = ["textkit", "intervals", "durations", "ratio"] as const;
export type SweName = (typeof SWE_NAMES)[number];

export interface SweFixture {
  instance: Record<string, unknown> & { instance_id: string; base_commit: string; patch: string; test_patch: string; FAIL_TO_PASS: string; PASS_TO_PASS: string };
  image: string;
}

export function sweInstance(name: SweName): SweFixture {
  const instance = JSON.parse(readFileSync(new URL(`../../config/swe/${name}/instance.json`, import.meta.url), "utf8"));
  return { instance, image: instanceImageName(instance.instance_id) };
}

/** Why the SWE images cannot be used here, or undefined (an error under POLAR_REQUIRE_DOCKER). */
export async function sweImagesMissing(docker = new Dockerode()): Promise<string | undefined> {
  for (const n of SWE_NAMES) {
    const { image } = sweInstance(n);
    const ok = await docker.getImage(image).inspect().then(() => true, () => false);
    if (!ok) {
      const why = `image ${image} is missing (scripts/swe-images.sh builds it)`;
      if (process.env.POLAR_REQUIRE_DOCKER) throw new Error(`POLAR_REQUIRE_DOCKER is set but ${why}`);
      console.warn(`[swe] ${why}: these tests are SKIPPED`);
      return why;
    }
  }
  return undefined;
}
