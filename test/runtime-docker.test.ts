import { rm } from "node:fs/promises";
import Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerUnavailable, TEST_IMAGE } from "./helpers/docker.ts";
import { RuntimeSpec } from "../src/protocol/schemas.ts";
import { DockerRuntime } from "../src/runtimes/docker.ts";
import { reapContainers } from "../src/runtimes/reaper.ts";
import { createRuntimeRegistry } from "../src/runtimes/registry.ts";
import { runtimeContract } from "./runtime-contract.ts";
import { type FakeProxy, makeCtx, makeSessionDir, makeToolsDir, startFakeNats, startFakeProxy } from "./runtime-helpers.ts";

const IMAGE = TEST_IMAGE;
const GATEWAY = `gw-docker-test-${process.pid}`;
const docker = new Dockerode();

const missing = await dockerUnavailable("runtime-docker", docker);

const labelled = async (gateway = GATEWAY) => (await docker.listContainers({ all: true, filters: { label: [`polar.gateway=${gateway}`] } })).map((c) => c.Id);

describe.skipIf(missing !== undefined)("docker runtime", () => {
  let proxy: FakeProxy;
  const dirs: string[] = [];
  const made: DockerRuntime[] = [];
  beforeAll(async () => {
    proxy = await startFakeProxy();
  });
  afterAll(async () => {
    await Promise.all(made.map((rt) => rt.stop()));
    await proxy?.close();
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
    // No container made by this file outlives it.
    for (const g of [GATEWAY, `${GATEWAY}-reap`, `${GATEWAY}-other`]) expect(await labelled(g)).toEqual([]);
  });

  async function makeDocker(spec: Partial<RuntimeSpec> = {}, start = true, gatewayId = GATEWAY, toolsDir?: string): Promise<DockerRuntime> {
    const dir = await makeSessionDir();
    dirs.push(dir);
    const full = RuntimeSpec.parse({ backend: "docker", image: IMAGE, ...spec });
    const ctx = makeCtx(dir, proxy, { gatewayId, toolsDir });
    const rt = createRuntimeRegistry({ docker }).resolve({ strategy: "docker" }, { spec: full, ctx }) as DockerRuntime;
    made.push(rt);
    if (start) await rt.start();
    return rt;
  }

  runtimeContract({ make: (spec) => makeDocker({ workdir: "/workspace", ...spec }) });

  it("labels the container, runs an init as PID 1, and the workdir is the spec's", async () => {
    const rt = await makeDocker({ workdir: "/testbed" });
    const info = await docker.getContainer(rt.containerId!).inspect();
    expect(info.Config.Labels).toMatchObject({ "polar.gateway": GATEWAY, "polar.managed": "true" });
    expect(info.HostConfig.Init).toBe(true);
    expect(info.HostConfig.NetworkMode).toBe("none");
    const r = await rt.exec("pwd; cat /proc/1/comm; ls /polar/session >/dev/null && echo session-mounted");
    expect(r.stdout).toBe("/testbed\ndocker-init\nsession-mounted\n");
    const t0 = performance.now();
    await rt.stop();
    expect(performance.now() - t0).toBeLessThan(3000);
    await expect(docker.getContainer(rt.containerId!).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await rt.stop();
  });

  it("a none-network container reaches the proxy through the socket and nothing else", async () => {
    const nats = await startFakeNats();
    try {
      const rt = await makeDocker();
      expect(rt.proxyUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const r = await rt.exec(`curl -s ${rt.proxyUrl}/v1/messages -d '{}'`);
      expect(JSON.parse(r.stdout)).toEqual({ ok: true, path: "/v1/messages", via: "unix" });
      const gw = "172.17.0.1";
      const targets = [`127.0.0.1:${nats.port}`, `${gw}:${nats.port}`, `127.0.0.1:${new URL(proxy.url).port}`, "1.1.1.1:80"];
      const probe = await rt.exec(`for t in ${targets.join(" ")}; do curl -s --max-time 2 -o /dev/null http://$t/ && echo "open $t" || echo "closed $t"; done; ls /sys/class/net; ls -A /polar/proxy`);
      expect(probe.stdout).toBe(targets.map((t) => `closed ${t}\n`).join("") + "lo\nproxy.sock\n");
      expect(nats.accepted()).toBe(0);
    } finally {
      await nats.close();
    }
  });

  it("network host uses the proxy's TCP URL; bridge keeps the forwarder", async () => {
    const host = await makeDocker({ network: "host" });
    expect(host.proxyUrl).toBe(proxy.url);
    expect(JSON.parse((await host.exec(`curl -s ${host.proxyUrl}/h`)).stdout).via).toBe("tcp");
    const bridge = await makeDocker({ network: "bridge" });
    expect(JSON.parse((await bridge.exec(`curl -s ${bridge.proxyUrl}/b`)).stdout).via).toBe("unix");
    expect((await bridge.exec("ls /sys/class/net | sort | tr '\\n' ' '")).stdout).toBe("eth0 lo ");
  });

  it("mounts the tools cache read-only; its Node runs the forwarder in an image without socat", async () => {
    const tools = await makeToolsDir();
    dirs.push(tools);
    const noSocat = `polar-test-nosocat:${process.pid}`;
    const c = await docker.createContainer({ Image: IMAGE, Cmd: ["rm", "/usr/bin/socat"], Labels: { "polar.gateway": GATEWAY } });
    await c.start();
    await c.wait();
    await c.commit({ repo: noSocat.split(":")[0], tag: noSocat.split(":")[1] });
    await c.remove({ force: true });
    try {
      const rt = await makeDocker({ image: noSocat }, true, GATEWAY, tools);
      const r = await rt.exec("hello-tool; command -v node; command -v socat || echo no-socat; touch /opt/polar-tools/x 2>/dev/null && echo rw || echo ro");
      expect(r.stdout).toBe("hello-tool 42\n/opt/polar-tools/node/bin/node\nno-socat\nro\n");
      expect(JSON.parse((await rt.exec(`curl -s ${rt.proxyUrl}/via-node`)).stdout)).toEqual({ ok: true, path: "/via-node", via: "unix" });
      await rt.stop();
    } finally {
      await docker.getImage(noSocat).remove({ force: true });
    }
  });

  it("fails to start on a missing image and leaves nothing behind", async () => {
    const rt = await makeDocker({ image: "polar-no-such-image:none" }, false);
    await expect(rt.start()).rejects.toMatchObject({ code: "runtime", message: expect.stringContaining("not present") });
    await expect(rt.exec("true")).rejects.toMatchObject({ code: "runtime" });
  });

  it("the reaper removes every container of its gateway and only those", async () => {
    const reap = `${GATEWAY}-reap`;
    const mine = [await makeDocker({}, true, reap), await makeDocker({}, true, reap)];
    const other = await makeDocker({}, true, `${GATEWAY}-other`);
    const before = await labelled(reap);
    expect(before.sort()).toEqual(mine.map((r) => r.containerId).sort());
    expect(await reapContainers(docker, reap)).toBe(2);
    expect(await labelled(reap)).toEqual([]);
    expect((await other.exec("echo alive")).stdout).toBe("alive\n");
    for (const rt of mine) await rt.stop(); // idempotent after the reaper
    await other.stop();
  });
});
