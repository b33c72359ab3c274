/**
 * A gateway restarted under a NEW node id still reaps what a dead one left:
 * a real `polar gateway` process runs a local-runtime session and a Docker
 * session, is killed with SIGKILL, and the gateway started after it (another
 * node id) removes the leftover host process and container by their owner
 * marker. What a live owner still runs (here: a sandbox of this test process
 * under yet another gateway id) is left alone.
 */
import Dockerode from "dockerode";
import { readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import { RuntimeSpec } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import type { LocalRuntime } from "../src/runtimes/local.ts";
import { OWNER_ENV, OWNER_LABEL, ownerDead, ownerMarker } from "../src/runtimes/owner.ts";
import { GATEWAY_MARKER_ENV, markedProcesses, processesWithEnv } from "../src/runtimes/process.ts";
import { createRuntimeRegistry } from "../src/runtimes/registry.ts";
import { spawnPolar, type PolarProcess } from "./helpers/cli-process.ts";
import { dockerUnavailable, TEST_IMAGE } from "./helpers/docker.ts";
import { waitFor } from "./helpers/gateway.ts";
import { type FakeProxy, makeCtx, makeSessionDir, startFakeProxy } from "./runtime-helpers.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const STARTUP_MS = 60_000; // tsx compiles the CLI on a loaded 2-core machine
const DEAD = "gw-reap-dead";
const docker = new Dockerode();
const missingDocker = await dockerUnavailable("reap-new-node-id");

const labelled = async (gatewayId: string) =>
  (await docker.listContainers({ all: true, filters: { label: ["polar.managed=true", `polar.gateway=${gatewayId}`] } })).map((c) => ({ id: c.Id, owner: c.Labels[OWNER_LABEL] }));

function task(task_id: string, runtime: Record<string, unknown>) {
  return {
    task_id,
    instruction: "x",
    pool: "reap-dead-pool",
    timeout_seconds: 600,
    runtime,
    agent: { harness: "shell", custom_shell: { command: "sleep 600" } },
  };
}

describe("owner markers", () => {
  it("this process is alive; a pid that is gone, a reused pid (other start time) and no /proc entry are dead; other hosts never", () => {
    const me = ownerMarker();
    const [host, pid, start] = me.split("/");
    expect(Number(pid)).toBe(process.pid);
    expect(ownerDead(me)).toBe(false);
    expect(ownerDead(`${host}/${pid}/${Number(start) + 1}`)).toBe(true);
    expect(ownerDead(`${host}/4194304/${start}`)).toBe(true); // above pid_max: no such process
    expect(ownerDead(`another-host/4194304/${start}`)).toBe(false);
    expect(ownerDead("not a marker")).toBe(false);
  });
});

describe.skipIf(missingDocker !== undefined)("a gateway restarted with a new node id", () => {
  let sys: TestSystem;
  let dead: PolarProcess | undefined;
  let proxy: FakeProxy;
  let live: LocalRuntime;
  const dirs: string[] = [];

  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor();
    proxy = await startFakeProxy();
    const dir = await makeSessionDir();
    dirs.push(dir);
    // A sandbox whose owner (this process) is alive, under a gateway id nobody restarts.
    const spec = RuntimeSpec.parse({ backend: "local", kwargs: { isolation: "none" } });
    live = createRuntimeRegistry().resolve({ strategy: "local" }, { spec, ctx: makeCtx(dir, proxy, { gatewayId: "gw-reap-live" }) }) as LocalRuntime;
    await live.start();
  });
  afterAll(async () => {
    dead?.signal("SIGKILL", true);
    await live?.stop();
    for (const c of await labelled(DEAD).catch(() => [])) await docker.getContainer(c.id).remove({ force: true }).catch(() => {});
    for (const p of markedProcesses(GATEWAY_MARKER_ENV, DEAD)) process.kill(p, "SIGKILL");
    await sys?.stop();
    await proxy?.close();
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });

  it("removes the host process and the container a SIGKILLed gateway left, and nothing a live owner runs", async () => {
    dead = spawnPolar(["gateway", "--nats", sys.nats.url, "--node-id", DEAD, "--pool", "reap-dead-pool", "--upstream", sys.upstream.url, "--max-run", "2", "--no-evaluator"], { POLAR_LOG_LEVEL: "warn" });
    await dead.waitFor(new RegExp(`gateway ${DEAD}: proxy`), STARTUP_MS);
    await request(sys.client, SUBJECTS.api.submit, task("reap-local", { backend: "local", kwargs: { isolation: "none" } }));
    await request(sys.client, SUBJECTS.api.submit, task("reap-docker", { backend: "docker", image: TEST_IMAGE }));

    // Both sandboxes run, marked with the dead-to-be gateway's process as owner.
    const owner = (v: string) => v.split("/")[1];
    const leftProcs = await waitFor("the local session's sleep", () => {
      const ps = processesWithEnv(OWNER_ENV).filter((p) => owner(p.value) === String(dead!.pid));
      return ps.length > 0 && ps;
    }, 60_000);
    expect(markedProcesses(GATEWAY_MARKER_ENV, DEAD).sort()).toEqual(leftProcs.map((p) => p.pid).sort());
    const containers = await waitFor("the Docker session's container", async () => {
      const cs = await labelled(DEAD);
      return cs.length > 0 && cs;
    }, 60_000);
    expect(containers.map((c) => owner(c.owner ?? ""))).toEqual([String(dead.pid)]);
    await live.exec("nohup sleep 1007 >/dev/null 2>&1 &");
    const liveProcs = markedProcesses(GATEWAY_MARKER_ENV, "gw-reap-live");
    expect(liveProcs.length).toBeGreaterThan(0);

    // kill -9 leaves them behind (the sandbox processes run in their own process groups). Any
    // gateway starting on this host from now on may reap them, so no assertion in between.
    dead.signal("SIGKILL", true);
    await dead.exited;
    /** Running (a zombie waiting for a parent that does not reap it is dead too). */
    const alive = (pid: number) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
      } catch {
        return false;
      }
    };

    // Another node id (and another pool, so it does not run the requeued sessions itself).
    await sys.startGateway({ nodeId: "gw-reap-new", pool: "reap-new-pool" });
    expect(leftProcs.filter((p) => alive(p.pid))).toEqual([]);
    expect(markedProcesses(GATEWAY_MARKER_ENV, DEAD)).toEqual([]);
    expect(await labelled(DEAD)).toEqual([]);
    for (const c of containers) expect((await docker.getContainer(c.id).inspect().catch((e) => e)).statusCode).toBe(404);
    expect(markedProcesses(GATEWAY_MARKER_ENV, "gw-reap-live")).toEqual(liveProcs);

    await request(sys.client, SUBJECTS.api.cancel, { task_id: "reap-local" });
    await request(sys.client, SUBJECTS.api.cancel, { task_id: "reap-docker" });
  }, 180_000);
});
