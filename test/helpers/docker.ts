/**
 * Whether Docker tests can run here: an engine that answers and the local
 * base image. Without them the tests skip with a visible message, unless
 * POLAR_REQUIRE_DOCKER is set (CI), where that is an error.
 */
import Dockerode from "dockerode";

export const TEST_IMAGE = process.env.POLAR_TEST_IMAGE ?? "polar-base:bookworm";

export async function dockerUnavailable(what: string, docker = new Dockerode()): Promise<string | undefined> {
  let missing: string | undefined;
  try {
    await docker.ping();
    await docker.getImage(TEST_IMAGE).inspect().catch(() => {
      missing = `image ${TEST_IMAGE} is missing (scripts/base-image.sh builds it)`;
    });
  } catch (e) {
    missing = `no Docker engine answers (${(e as Error).message})`;
  }
  if (missing && process.env.POLAR_REQUIRE_DOCKER) throw new Error(`POLAR_REQUIRE_DOCKER is set but ${missing}`);
  if (missing) console.warn(`[${what}] ${missing}: these Docker tests are SKIPPED`);
  return missing;
}
