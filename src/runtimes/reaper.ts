/**
 * Removes the containers a gateway left behind (a crash, a kill -9): every
 * container labelled with this gateway's id, running or not. Called when a
 * gateway starts, before it takes sessions. Resolves with how many it removed.
 */
import type Dockerode from "dockerode";
import { runtimeError } from "./common.ts";

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
