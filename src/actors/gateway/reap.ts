/**
 * On start, a gateway removes what an earlier process with the same node id
 * left behind (containers, local runtime processes). A missing Docker engine
 * is not an error: there is then nothing of ours to reap.
 */
import { existsSync } from "node:fs";
import Dockerode from "dockerode";
import type { Logger } from "pino";
import { errorMessage } from "../../protocol/errors.ts";
import { reapContainers, reapLocalProcesses } from "../../runtimes/reaper.ts";

export async function reapLeftovers(nodeId: string, log: Logger): Promise<void> {
  const processes = await reapLocalProcesses(nodeId).catch((err) => {
    log.warn({ err: errorMessage(err) }, "could not reap local runtime processes");
    return 0;
  });
  let containers = 0;
  const socket = process.env.DOCKER_HOST ? undefined : "/var/run/docker.sock";
  if (!socket || existsSync(socket)) {
    containers = await reapContainers(new Dockerode(), nodeId).catch((err) => {
      log.debug({ err: errorMessage(err) }, "no Docker engine to reap containers from");
      return 0;
    });
  }
  if (processes || containers) log.warn({ processes, containers }, "reaped what an earlier gateway with this node id left behind");
}
