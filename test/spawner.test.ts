/**
 * Host processes are started by a small spawner process, so the gateway's
 * event loop (which serves the model proxy) never blocks in fork and exec.
 * Real processes: output, exit codes, stdin, a timeout that kills the tree,
 * a cancel, a command that does not exist, and the spawner dying mid-run
 * (the run fails with a clear error, its process is killed, the next run
 * gets a new spawner). The same runs without the spawner give the same results.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runProcess, spawnerPids } from "../src/runtimes/process.ts";
import { waitFor } from "./helpers/gateway.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "polar-spawner-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
  } catch {
    return false;
  }
}

describe.each(["spawner", "direct"])("runProcess (%s)", (mode) => {
  beforeAll(() => {
    if (mode === "direct") process.env.POLAR_SPAWNER = "off";
    else delete process.env.POLAR_SPAWNER;
  });
  afterAll(() => {
    delete process.env.POLAR_SPAWNER;
  });

  it("returns stdout, stderr, the exit code and feeds stdin, in its cwd and env", async () => {
    let spawned = 0;
    const r = await runProcess(["/bin/sh", "-c", 'read x; echo "out:$x:$PWD:$FOO"; echo err >&2; exit 3'], {
      cwd: dir,
      env: { FOO: "bar", PATH: process.env.PATH ?? "/usr/bin:/bin" },
      stdin: "in\n",
      onSpawn: (pid) => (spawned = pid),
    });
    expect(r).toMatchObject({ stdout: `out:in:${dir}:bar\n`, stderr: "err\n", exitCode: 3, timedOut: false, cancelled: false });
    expect(spawned).toBeGreaterThan(0);
    expect(spawned).not.toBe(process.pid);
    if (mode === "spawner") {
      expect(spawnerPids().length).toBeGreaterThan(0);
      expect(spawnerPids()).not.toContain(spawned);
    }
  });

  it("bounds the output and reports a signal as 128 + its number", async () => {
    const r = await runProcess(["/bin/bash", "-c", "head -c 5000 /dev/zero | tr '\\0' a; kill -TERM $$"], { maxOutputBytes: 100 });
    expect(r.stdout).toBe(`${"a".repeat(100)}\n[polar: 4900 more bytes dropped]`);
    expect(r.exitCode).toBe(143);
  });

  it("a timeout kills the whole tree, including a child that left the group", async () => {
    const marker = join(dir, `${mode}-grandchild.pid`);
    const r = await runProcess(["/bin/bash", "-c", `setsid sleep 60 & echo $! > ${marker}; sleep 60`], { timeoutMs: 500 });
    expect(r).toMatchObject({ exitCode: -1, timedOut: true, cancelled: false });
    const grandchild = Number(readFileSync(marker, "utf8"));
    await waitFor("the setsid grandchild to die", () => !alive(grandchild));
  });

  it("a cancel kills it at once and says so", async () => {
    const ac = new AbortController();
    let pid = 0;
    const p = runProcess(["/bin/sleep", "60"], { signal: ac.signal, onSpawn: (x) => (pid = x) });
    await waitFor("the process to start", () => pid > 0);
    const t0 = Date.now();
    ac.abort();
    const r = await p;
    expect(r).toMatchObject({ exitCode: -1, timedOut: true, cancelled: true });
    expect(Date.now() - t0).toBeLessThan(5000);
    await waitFor("sleep to die", () => !alive(pid));
  });

  it("a command that does not exist rejects with ENOENT", async () => {
    const e = (await runProcess([join(dir, "no-such-command")]).catch((x: unknown) => x)) as NodeJS.ErrnoException;
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe("ENOENT");
  });
});

describe("the spawner process", () => {
  it("dying mid-run fails the run clearly, kills its process, and the next run gets a new spawner", async () => {
    delete process.env.POLAR_SPAWNER;
    let pid = 0;
    const p = runProcess(["/bin/sleep", "60"], { onSpawn: (x) => (pid = x) });
    await waitFor("the process to start", () => pid > 0);
    const first = spawnerPids();
    expect(first.length).toBeGreaterThan(0);
    for (const p of first) process.kill(p, "SIGKILL");
    await expect(p).rejects.toThrow(/process spawner exited \(SIGKILL\)/);
    await waitFor("the orphaned sleep to be killed", () => !alive(pid));
    const r = await runProcess(["/bin/echo", "again"]);
    expect(r.stdout).toBe("again\n");
    expect(spawnerPids().length).toBeGreaterThan(0);
    for (const p of spawnerPids()) expect(first).not.toContain(p);
    for (const p of first) expect(existsSync(`/proc/${p}`)).toBe(false);
  });
});
