/**
 * Removes what a gateway left behind (a crash, a kill -9), called when a
 * gateway starts, before it takes sessions:
 * - reapContainers: every container labelled with this gateway's id, running or not;
 * - reapLocalProcesses: every host process a local runtime of this gateway started.
 * Each resolves with how many it removed.
 */
import type Dockerode from "dockerode";
import { runtimeError } from "./common.ts";
import { GATEWAY_MARKER_ENV, killMarkedAndWait, markedProcesses } from "./process.ts";

export async function reapContainers(docker: Dockerode, gatewayId: string): Promise<number> {
  let list: Dockerode.ContainerInfo[];
  try {
    list = await docker.listContainers({ all: true, filters: { label: ["polar.managed=true", `polar.gateway=${gatewayId}`] } });
  } catch (e) {
    throw runtimeError(`cannot list containers to reap: ${(e as Error).message}`, e);
  }
  const results = await Promise.allSettled(list.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true })));
  return results.filter((r) => r.status === "fulfilled" || (r.reason as { statusCode?: number }).statusCode === 404).length;
}

export async function reapLocalProcesses(gatewayId: string): Promise<number> {
  const found = markedProcesses(GATEWAY_MARKER_ENV, gatewayId).length;
  await killMarkedAndWait(GATEWAY_MARKER_ENV, gatewayId);
  return found;
}
