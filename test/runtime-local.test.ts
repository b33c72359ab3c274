import { rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../src/tools/paths.ts";
import { RuntimeSpec } from "../src/protocol/schemas.ts";
import { probeBwrap } from "../src/runtimes/bwrap.ts";
import { cgroupsUsable } from "../src/runtimes/cgroups.ts";
import { LocalRuntime } from "../src/runtimes/local.ts";
import { MARKER_ENV, markedProcesses } from "../src/runtimes/process.ts";
import { reapLocalProcesses } from "../src/runtimes/reaper.ts";
import { createRuntimeRegistry } from "../src/runtimes/registry.ts";
import { runtimeContract } from "./runtime-contract.ts";
import { waitFor } from "./helpers/gateway.ts";
import { type FakeProxy, makeCtx, makeSessionDir, makeToolsDir, startFakeNats, startFakeProxy } from "./runtime-helpers.ts";

const limitsUnavailable = (await cgroupsUsable()) ? undefined : "this process cannot create cgroups (not root, or a read-only cgroup fs)";
let proxy: FakeProxy;
let tools: string;
const dirs: string[] = [];
const made: LocalRuntime[] = [];

beforeAll(async () => {
  proxy = await startFakeProxy();
  tools = await makeToolsDir();
  dirs.push(tools);
});

async function expectTools(rt: LocalRuntime): Promise<void> {
  const r = await rt.exec("hello-tool; command -v node");
  expect(r.stdout).toBe(`hello-tool 42\n${tools}/node/bin/node\n`);
}
afterAll(async () => {
  await Promise.all(made.map((rt) => rt.stop()));
  await proxy.close();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  // No process of any runtime made in this file outlives it.
  expect(made.flatMap((rt) => markedProcesses(MARKER_ENV, rt.id))).toEqual([]);
});

async function makeLocal(isolation: "none" | "bwrap", spec: Partial<RuntimeSpec> = {}, toolsDir?: string, gatewayId?: string): Promise<LocalRuntime> {
  const dir = await makeSessionDir();
  dirs.push(dir);
  const full = RuntimeSpec.parse({ backend: "local", ...spec, kwargs: { isolation, ...(spec.kwargs ?? {}) } });
  const rt = createRuntimeRegistry().resolve({ strategy: "local" }, { spec: full, ctx: makeCtx(dir, proxy, { toolsDir, ...(gatewayId ? { gatewayId } : {}) }) }) as LocalRuntime;
  made.push(rt);
  await rt.start();
  return rt;
}

describe("local runtime, plain processes", () => {
  runtimeContract({ make: (spec) => makeLocal("none", spec), limitsUnavailable });

  it("reaches the proxy at its TCP URL and leaves no stray process after stop", async () => {
    const rt = await makeLocal("none");
    expect(rt.isolated).toBe(false);
    expect(rt.proxyUrl).toBe(proxy.url);
    const r = await rt.exec(`curl -s ${rt.proxyUrl}/v1/models`);
    expect(JSON.parse(r.stdout)).toEqual({ ok: true, path: "/v1/models", via: "tcp" });
    await rt.exec("nohup sleep 1000 >/dev/null 2>&1 & setsid sleep 1001 >/dev/null 2>&1 < /dev/null &");
    // both background processes (one escaped into its own session) are running...
    await waitFor("both background processes", () => markedProcesses(MARKER_ENV, rt.id).length >= 2, 10_000);
    await rt.stop();
    expect(markedProcesses(MARKER_ENV, rt.id)).toEqual([]);
  });

  it("reapLocalProcesses kills what a gateway's local runtimes left running, and only that", async () => {
    const rt = await makeLocal("none", {}, undefined, "gw-reap-local");
    const other = await makeLocal("none");
    await rt.exec("setsid sleep 1002 >/dev/null 2>&1 < /dev/null & nohup sleep 1003 >/dev/null 2>&1 &");
    await other.exec("nohup sleep 1004 >/dev/null 2>&1 &");
    // setsid forks once more before it execs: wait until just the two sleeps are left.
    for (let i = 0; i < 100 && markedProcesses(MARKER_ENV, rt.id).length !== 2; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await reapLocalProcesses("gw-reap-local")).toBe(2);
    expect(markedProcesses(MARKER_ENV, rt.id)).toEqual([]);
    expect(markedProcesses(MARKER_ENV, other.id)).toHaveLength(1);
  });

  it("puts the tools cache's CLIs and Node first on PATH", async () => {
    await expectTools(await makeLocal("none", {}, tools));
  });

  it("refuses writes outside the session directory", async () => {
    const rt = await makeLocal("none");
    await expect(rt.writeFile("/etc/polar-should-not-exist", "x")).rejects.toMatchObject({ code: "runtime" });
    await expect(rt.upload(rt.workdir, "../../outside")).rejects.toMatchObject({ code: "runtime" });
  });
});

const bwrap = probeBwrap();
if (!bwrap) console.warn("[runtime-local] bubblewrap is not available here: the bwrap isolation tests are SKIPPED");

describe.skipIf(!bwrap)("local runtime, bubblewrap isolation", () => {
  runtimeContract({ make: (spec) => makeLocal("bwrap", spec), limitsUnavailable });

  it("a none-network sandbox reaches the proxy through the socket and nothing else", async () => {
    const nats = await startFakeNats();
    try {
      const rt = await makeLocal("bwrap");
      expect(rt.isolated).toBe(true);
      expect(rt.proxyUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(rt.proxyUrl).not.toBe(proxy.url);
      const r = await rt.exec(`curl -s ${rt.proxyUrl}/v1/chat/completions -d '{}'`);
      expect(JSON.parse(r.stdout)).toEqual({ ok: true, path: "/v1/chat/completions", via: "unix" });
      const proxyPort = new URL(proxy.url).port;
      const probe = await rt.exec(`for p in ${nats.port} ${proxyPort} 22 80; do curl -s --max-time 2 -o /dev/null http://127.0.0.1:$p/ && echo "open $p" || echo "closed $p"; done`);
      expect(probe.stdout).toBe(`closed ${nats.port}\nclosed ${proxyPort}\nclosed 22\nclosed 80\n`);
      expect(nats.accepted()).toBe(0);
    } finally {
      await nats.close();
    }
  });

  it("hides the other sessions and the gateway's HOME; the proxy socket shows alone", async () => {
    const rt = await makeLocal("bwrap");
    const sessionDir = dirname(rt.workdir);
    expect(dirs.length).toBeGreaterThan(3); // other sessions exist on the host beside this one
    const r = await rt.exec(`ls -A ${dirname(sessionDir)}; echo --; ls -A ${dirname(proxy.socketPath)}; echo --; ls -A ${process.env.HOME ?? "/root"} | wc -l`);
    // polar's own checkout is bound read-only; when it lives in the same directory it shows there too
    const parent = `${dirname(sessionDir)}/`;
    const repo = REPO_ROOT.startsWith(parent) ? [REPO_ROOT.slice(parent.length).split("/")[0]] : [];
    const want = [...new Set([basename(sessionDir), basename(dirname(proxy.socketPath)), ...repo])].sort().join("\n");
    expect(r.stdout).toBe(`${want}\n--\nproxy.sock\n--\n0\n`);
  });

  it("sees the host root read-only, a private /tmp and a private pid namespace", async () => {
    const rt = await makeLocal("bwrap");
    const hostFile = join(tmpdir(), `polar-host-only-${process.pid}`);
    await writeFile(hostFile, "host");
    try {
      const r = await rt.exec(`touch /usr/polar-probe 2>/dev/null && echo wrote || echo ro; test -e ${hostFile} && echo visible || echo hidden; echo $$`);
      const [ro, tmp, pid] = r.stdout.trim().split("\n");
      expect([ro, tmp]).toEqual(["ro", "hidden"]);
      expect(Number(pid)).toBeLessThan(10);
    } finally {
      await rm(hostFile, { force: true });
    }
  });

  it("sees the tools cache read-only, its CLIs and Node first on PATH", async () => {
    const rt = await makeLocal("bwrap", {}, tools);
    await expectTools(rt);
    expect((await rt.exec(`touch ${tools}/x 2>/dev/null && echo rw || echo ro`)).stdout).toBe("ro\n");
  });

  it("network host shares the host network", async () => {
    const rt = await makeLocal("bwrap", { network: "host" });
    expect(rt.proxyUrl).toBe(proxy.url);
    const r = await rt.exec(`curl -s ${rt.proxyUrl}/x`);
    expect(JSON.parse(r.stdout).via).toBe("tcp");
  });
});
