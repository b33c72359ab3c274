/**
 * On start, a gateway removes what an earlier process left behind
 * (containers, local runtime processes): everything of its own node id, and
 * everything whose owner process on this host is dead whatever its node id
 * (a gateway restarted under a new id). A missing Docker engine is not an
 * error: there is then nothing of ours to reap.
 */
import { existsSync } from "node:fs";
import Dockerode from "dockerode";
import type { Logger } from "pino";
import { errorMessage } from "../../protocol/errors.ts";
import { reapContainers, reapLocalProcesses, reapOrphanContainers, reapOrphanProcesses } from "../../runtimes/reaper.ts";

export async function reapLeftovers(nodeId: string, log: Logger): Promise<void> {
  const warn = (what: string) => (err: unknown) => {
    log.warn({ err: errorMessage(err) }, `could not reap ${what}`);
    return 0;
  };
  const processes = (await reapLocalProcesses(nodeId).catch(warn("local runtime processes"))) + (await reapOrphanProcesses().catch(warn("orphaned local runtime processes")));
  let containers = 0;
  const socket = process.env.DOCKER_HOST ? undefined : "/var/run/docker.sock";
  if (!socket || existsSync(socket)) {
    const docker = new Dockerode();
    const quiet = (err: unknown) => {
      log.debug({ err: errorMessage(err) }, "no Docker engine to reap containers from");
      return 0;
    };
    containers = (await reapContainers(docker, nodeId).catch(quiet)) + (await reapOrphanContainers(docker).catch(quiet));
  }
  if (processes || containers) log.warn({ processes, containers }, "reaped what an earlier gateway (this node id, or a dead process on this host) left behind");
}
