/**
 * Removes what a gateway left behind (a crash, a kill -9), called when a
 * gateway starts, before it takes sessions:
 * - reapContainers / reapLocalProcesses: everything labelled with one gateway id
 *   (a gateway restarted under the same id);
 * - reapOrphanContainers / reapOrphanProcesses: everything whose owner process
 *   (owner.ts: host, pid and start time) ran on this host and is dead, whatever
 *   its gateway id, so a gateway restarted under a new id still cleans up. What
 *   a live gateway (on this host or another) runs is never touched.
 * Each resolves with how many it removed.
 */
import type Dockerode from "dockerode";
import { runtimeError } from "./common.ts";
import { OWNER_ENV, OWNER_LABEL, ownerDead } from "./owner.ts";
import { GATEWAY_MARKER_ENV, killMarkedAndWait, killTree, markedProcesses, processesWithEnv } from "./process.ts";

async function removeContainers(docker: Dockerode, list: Dockerode.ContainerInfo[]): Promise<number> {
  const results = await Promise.allSettled(list.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true })));
  return results.filter((r) => r.status === "fulfilled" || (r.reason as { statusCode?: number }).statusCode === 404).length;
}

async function listManaged(docker: Dockerode, labels: string[]): Promise<Dockerode.ContainerInfo[]> {
  try {
    return await docker.listContainers({ all: true, filters: { label: ["polar.managed=true", ...labels] } });
  } catch (e) {
    throw runtimeError(`cannot list containers to reap: ${(e as Error).message}`, e);
  }
}

export async function reapContainers(docker: Dockerode, gatewayId: string): Promise<number> {
  return removeContainers(docker, await listManaged(docker, [`polar.gateway=${gatewayId}`]));
}

/** Every polar container whose owner process ran on this host and is gone. */
export async function reapOrphanContainers(docker: Dockerode): Promise<number> {
  const list = await listManaged(docker, [OWNER_LABEL]);
  return removeContainers(docker, list.filter((c) => ownerDead(c.Labels[OWNER_LABEL] ?? "")));
}

export async function reapLocalProcesses(gatewayId: string): Promise<number> {
  const found = markedProcesses(GATEWAY_MARKER_ENV, gatewayId).length;
  await killMarkedAndWait(GATEWAY_MARKER_ENV, gatewayId);
  return found;
}

/** Every local runtime process whose owner process ran on this host and is gone; waits (bounded) until they are. */
export async function reapOrphanProcesses(timeoutMs = 3000): Promise<number> {
  const orphans = () => processesWithEnv(OWNER_ENV).filter((p) => ownerDead(p.value));
  const found = orphans().length;
  const deadline = performance.now() + timeoutMs;
  for (let left = orphans(); left.length > 0 && performance.now() < deadline; left = orphans()) {
    for (const p of left) killTree(p.pid);
    await new Promise((r) => setTimeout(r, 20));
  }
  return found;
}
