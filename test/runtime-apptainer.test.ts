/**
 * Apptainer is not packaged for Debian 12, so these tests check the command
 * lines the backend builds and the order it runs them in (through a recording
 * runner), and a real failure when the binary is missing. They do not run a
 * real apptainer.
 */
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { RuntimeSpec } from "../src/protocol/schemas.ts";
import { apptainerEnv, execArgv, instanceName, instanceStartArgv, instanceStopArgv } from "../src/runtimes/apptainer-commands.ts";
import { ApptainerRuntime, type Runner } from "../src/runtimes/apptainer.ts";
import { FORWARDER_SCRIPT } from "../src/runtimes/forwarder.ts";
import { createRuntimeRegistry } from "../src/runtimes/registry.ts";
import type { ExecResult } from "../src/runtimes/types.ts";
import { makeCtx, makeSessionDir } from "./runtime-helpers.ts";

const assets = FORWARDER_SCRIPT.slice(0, FORWARDER_SCRIPT.lastIndexOf("/"));
const dirs: string[] = [];
afterAll(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

const ok = (stdout = ""): ExecResult => ({ stdout, stderr: "", exitCode: 0, timedOut: false, cancelled: false, durationMs: 1 });

function recorder(fail?: (argv: string[]) => ExecResult | undefined) {
  const calls: { argv: string[]; env: Record<string, string> }[] = [];
  const run: Runner = async (argv, opts) => {
    calls.push({ argv, env: opts.env ?? {} });
    return fail?.(argv) ?? ok();
  };
  return { calls, run };
}

describe("apptainer command lines", () => {
  it("instance start carries overlay, network, limits, gpus and every bind", () => {
    const spec = RuntimeSpec.parse({
      backend: "apptainer",
      image: "/images/env.sif",
      gpus: 1,
      cpus: 2,
      memory_mb: 4096,
      pids_limit: 256,
      internet_volumes: ["/data/cache:/cache"],
    });
    const argv = instanceStartArgv({
      binary: "apptainer",
      name: "polar-s1-abcdef12",
      spec,
      sessionDir: "/host/s1",
      overlayDir: "/host/s1/.overlay",
      homeDir: "/host/s1/.home",
      home: "/root",
      toolsDir: "/host/tools",
      proxySocket: "/run/polar/proxy.sock",
      network: "none",
      volumes: ["/ds:/ds:ro"],
    });
    expect(argv).toEqual([
      "apptainer", "instance", "start", "--cleanenv", "--no-mount", "cwd,bind-paths", "--home", "/host/s1/.home:/root",
      "--overlay", "/host/s1/.overlay", "--nv", "--net", "--network", "none", "--cpus", "2", "--memory", "4096M", "--pids-limit", "256",
      "--bind", "/host/s1:/polar/session", "--bind", `${assets}:/opt/polar-runtime:ro`, "--bind", "/ds:/ds:ro",
      "--bind", "/host/tools:/opt/polar-tools:ro", "--bind", "/run/polar/proxy.sock:/polar/proxy/proxy.sock:ro", "--bind", "/data/cache:/cache",
      "/images/env.sif", "polar-s1-abcdef12",
    ]);
  });

  it("host network adds no --net; internet volumes need allow_internet", () => {
    const spec = RuntimeSpec.parse({ backend: "apptainer", image: "x.sif", allow_internet: false, internet_volumes: ["/a:/a"] });
    const argv = instanceStartArgv({ binary: "/opt/bin/apptainer", name: "n", spec, sessionDir: "/s", overlayDir: "/o", homeDir: "/h", home: "/root", network: "host", volumes: [] });
    expect(argv).not.toContain("--net");
    expect(argv).not.toContain("/a:/a");
    expect(argv.slice(0, 3)).toEqual(["/opt/bin/apptainer", "instance", "start"]);
  });

  it("exec, stop, names and the environment", () => {
    expect(execArgv("apptainer", "n1", "/testbed", "echo 'a b'")).toEqual(["apptainer", "exec", "--cleanenv", "--pwd", "/testbed", "instance://n1", "/bin/bash", "-c", "echo 'a b'"]);
    expect(instanceStopArgv("apptainer", "n1")).toEqual(["apptainer", "instance", "stop", "--force", "n1"]);
    const name = instanceName("session/with:odd chars and a long tail 0123456789");
    expect(name).toMatch(/^polar-session_with_odd_chars_and_a_l-[0-9a-f]{8}$/);
    expect(instanceName("abc")).not.toBe(instanceName("abd"));
    expect(apptainerEnv({ A: "x,y=z\nw", HOME: "/root", PATH: "/p" }, { PATH: "/usr/bin", SECRET: "no" })).toEqual({
      PATH: "/usr/bin",
      APPTAINERENV_A: "x,y=z\nw",
      APPTAINERENV_PATH: "/p",
    });
  });
});

describe("apptainer runtime", () => {
  async function make(spec: Partial<RuntimeSpec>, run: Runner, socket = true) {
    const dir = await makeSessionDir();
    dirs.push(dir);
    const full = RuntimeSpec.parse({ backend: "apptainer", image: "/img/env.sif", kwargs: { binary: "apptainer" }, ...spec });
    const ctx = makeCtx(dir, { url: "http://127.0.0.1:7000", socketPath: socket ? "/run/polar/proxy.sock" : undefined });
    return { rt: new ApptainerRuntime(full, ctx, run), dir, ctx };
  }

  it("starts an instance, starts the forwarder, waits for it, execs and stops once", async () => {
    const rec = recorder();
    const { rt, ctx } = await make({ workdir: "/testbed", env: { S: "1" } }, rec.run);
    expect(rt.proxyUrl).toBe("http://127.0.0.1:18080");
    await rt.start();
    const inst = `instance://${instanceName(ctx.sessionId)}`;
    expect(rec.calls.map((c) => c.argv.slice(0, 2).concat(c.argv.includes(inst) ? ["@"] : []))).toEqual([
      ["apptainer", "instance"],
      ["apptainer", "exec", "@"],
      ["apptainer", "exec", "@"],
      ["apptainer", "exec", "@"],
    ]);
    expect(rec.calls[1].argv.at(-1)).toBe("mkdir -p '/testbed'");
    expect(rec.calls[2].argv.at(-1)).toContain("UNIX-CONNECT:/polar/proxy/proxy.sock");
    expect(rec.calls[3].argv.at(-1)).toContain("/proc/net/tcp");
    await rt.exec("make test", { cwd: "sub", env: { A: "b" } });
    const call = rec.calls.at(-1)!;
    expect(call.argv).toEqual(execArgv("apptainer", instanceName(ctx.sessionId), "/testbed/sub", "make test"));
    expect(call.env).toMatchObject({ APPTAINERENV_A: "b", APPTAINERENV_S: "1", APPTAINERENV_PATH: expect.stringContaining("/usr/bin") });
    expect(call.env).not.toHaveProperty("APPTAINERENV_HOME");
    await rt.stop();
    await rt.stop();
    const stops = rec.calls.filter((c) => c.argv[2] === "stop");
    expect(stops.map((c) => c.argv)).toEqual([instanceStopArgv("apptainer", instanceName(ctx.sessionId))]);
    await expect(rt.exec("true")).rejects.toMatchObject({ code: "runtime" });
  });

  it("copies into /polar/session on the host and elsewhere through staging and cp -a", async () => {
    const rec = recorder();
    const { rt, dir } = await make({ network: "host" }, rec.run, false);
    await rt.start();
    expect(rec.calls).toHaveLength(2); // no forwarder on the host network
    await rt.writeFile("/polar/session/notes/a.txt", "hello", 0o600);
    expect(await readFile(join(dir, "notes/a.txt"), "utf8")).toBe("hello");
    expect(new TextDecoder().decode(await rt.readFile("/polar/session/notes/a.txt"))).toBe("hello");
    const n = rec.calls.length;
    await rt.writeFile("/testbed/b.txt", "x");
    expect(rec.calls).toHaveLength(n + 1);
    expect(rec.calls[n].argv.at(-1)).toMatch(/^mkdir -p '\/testbed' && rm -rf '\/testbed\/b.txt' && cp -a '\/polar\/session\/.transfer\/[0-9a-f-]+' '\/testbed\/b.txt'$/);
    await rt.stop();
  });

  it("a failed instance start rejects with its stderr and stops what it began", async () => {
    const rec = recorder((argv) => (argv[2] === "start" ? { ...ok(), exitCode: 255, stderr: "FATAL: image not found" } : undefined));
    const { rt } = await make({}, rec.run);
    await expect(rt.start()).rejects.toMatchObject({ code: "runtime", message: expect.stringContaining("FATAL: image not found") });
    expect(rec.calls.at(-1)!.argv[2]).toBe("stop");
  });

  it("a missing apptainer binary is a runtime error (real spawn)", async () => {
    const dir = await makeSessionDir();
    dirs.push(dir);
    const spec = RuntimeSpec.parse({ backend: "apptainer", image: "x.sif", kwargs: { binary: "/nonexistent/apptainer" } });
    const rt = createRuntimeRegistry().resolve({ strategy: "apptainer" }, { spec, ctx: makeCtx(dir, { url: "http://127.0.0.1:1" }) });
    await expect(rt.start()).rejects.toMatchObject({ code: "runtime", message: expect.stringContaining("is apptainer installed?") });
  });
});
