/**
 * bubblewrap sandboxes show only what a session needs: no host secret
 * outside the minimal root, no /etc/shadow, no route to NATS on loopback, no
 * other session's files; and without bubblewrap `auto` refuses to run
 * instead of falling back to a plain host process.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer, type NatsServerHandle } from "../src/nats/launcher.ts";
import { probeBwrap } from "../src/runtimes/bwrap.ts";
import { LocalRuntime } from "../src/runtimes/local.ts";
import { silentLogger } from "../src/util/log.ts";

const log = silentLogger();
let work: string;
let secretDir: string;
let nats: NatsServerHandle;

function runtime(id: string, kwargs: Record<string, unknown> = {}): LocalRuntime {
  return new LocalRuntime({ backend: "local", kwargs, env: {}, prepare: [] } as any, {
    sessionId: id, gatewayId: "gw-sandbox-test", proxy: { url: "http://127.0.0.1:9", socketPath: join(work, "proxy.sock") }, sessionDir: join(work, id), log,
  } as any);
}

beforeAll(async () => {
  if (!probeBwrap()) throw new Error("bubblewrap is required for the sandbox tests (Debian package bubblewrap)");
  work = await mkdtemp(join(tmpdir(), "polar-sec-sandbox-"));
  // Outside /tmp and HOME: a place the old "whole host root read-only" view showed.
  secretDir = await mkdtemp("/var/tmp/polar-sec-");
  await writeFile(join(secretDir, "secret.txt"), "CANARY-sandbox-7f3e\n");
  await writeFile(join(work, "proxy.sock"), ""); // stands in for the proxy's socket: a private network needs one
  nats = await startNatsServer();
}, 30_000);

afterAll(async () => {
  await nats?.stop();
  if (work) await rm(work, { recursive: true, force: true });
  if (secretDir) await rm(secretDir, { recursive: true, force: true });
});

describe("bubblewrap sandbox", () => {
  it("cannot read a planted host secret or /etc/shadow, cannot reach NATS, cannot see another session", async () => {
    const a = runtime("ses-a");
    const b = runtime("ses-b");
    await a.start();
    await b.start();
    try {
      expect(a.isolated).toBe(true);
      await a.writeFile("mine.txt", "session a's file\n");
      const secret = await b.exec(`cat ${secretDir}/secret.txt; echo "exit=$?"; ls /var/tmp 2>&1; ls /root 2>&1; cat /etc/shadow 2>&1`);
      expect(secret.stdout).not.toContain("CANARY");
      expect(secret.stdout).toContain("exit=1");
      expect(secret.stdout).toMatch(/\/etc\/shadow: No such file/);
      const net = await b.exec(`(echo > /dev/tcp/127.0.0.1/${nats.port}) 2>/dev/null && echo reached || echo refused`);
      expect(net.stdout.trim()).toBe("refused");
      const other = await b.exec(`cat ${join(work, "ses-a", "workspace", "mine.txt")} 2>&1; ls ${work}`);
      expect(other.stdout).not.toContain("session a's file");
      expect(other.stdout.trim().split(/\s+/)).not.toContain("ses-a");
      // what it needs is there: its own workspace, a shell, node
      const own = await b.exec("echo ok > f.txt && cat f.txt && node -e 'console.log(1+1)'");
      expect(own.stdout).toBe("ok\n2\n");
      // for contrast, the host sees all of it
      const host = runtime("ses-host", { isolation: "none" });
      await host.start();
      try {
        expect((await host.exec(`cat ${secretDir}/secret.txt`)).stdout).toContain("CANARY");
      } finally {
        await host.stop();
      }
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it("auto without bubblewrap refuses to run a harness; only an explicit isolation none runs on the host", async () => {
    const path = process.env.PATH;
    const dir = join(work, "nobwrap-bin");
    await mkdir(dir, { recursive: true });
    process.env.PATH = dir; // a PATH without bwrap
    let auto: LocalRuntime;
    let none: LocalRuntime;
    try {
      auto = runtime("ses-auto");
      none = runtime("ses-none", { isolation: "none" });
    } finally {
      process.env.PATH = path;
    }
    await expect(auto.start()).rejects.toThrow(/bubblewrap is missing.*isolation auto cannot be given/);
    await none.start();
    try {
      expect((await none.exec("echo plain")).stdout).toBe("plain\n");
    } finally {
      await none.stop();
    }
  });
});
