/**
 * The terminal side: readable log lines on a TTY and JSON elsewhere, a
 * repeated warning said once with its remedy, one state file per `polar up`
 * instance (two on one machine do not touch each other's), and client
 * commands saying which NATS server they found on their own.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger, warnOnce } from "../src/util/log.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const POLAR = join(ROOT, "bin/polar.js");

function sink(isTTY: boolean) {
  const chunks: string[] = [];
  const out = Object.assign(
    new Writable({
      write(c, _e, cb) {
        chunks.push(String(c));
        cb();
      },
    }),
    { isTTY },
  );
  return { out, text: () => chunks.join("") };
}

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("log lines", () => {
  it("are readable on a TTY and JSON elsewhere or with format json", () => {
    const tty = sink(true);
    createLogger({ destination: tty.out }).info({ task_id: "t1" }, "task finished");
    expect(tty.text()).toMatch(/^\S*\[\d\d:\d\d:\d\d\.\d{3}\]\S* \S*INFO\S*: \S*task finished/);
    expect(tty.text()).toContain("t1");
    expect(() => JSON.parse(tty.text())).toThrow();

    const pipe = sink(false);
    createLogger({ destination: pipe.out }).info({ task_id: "t1" }, "task finished");
    expect(JSON.parse(pipe.text())).toMatchObject({ msg: "task finished", task_id: "t1", level: 30 });

    const forced = sink(true);
    createLogger({ destination: forced.out, format: "json" }).warn("x");
    expect(JSON.parse(forced.text()).msg).toBe("x");
  });

  it("say a repeated warning once, with its remedy", () => {
    const s = sink(false);
    const log = createLogger({ destination: s.out });
    for (let i = 0; i < 5; i++) warnOnce(log, "test-repeat", "bubblewrap not available", "apt-get install bubblewrap", { session_id: `s${i}` });
    const lines = s.text().trim().split("\n").map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ msg: "bubblewrap not available", remedy: "apt-get install bubblewrap", session_id: "s0" });
  });
});

describe("polar up instances", () => {
  const procs: ChildProcess[] = [];
  afterAll(() => {
    for (const p of procs) p.kill("SIGKILL");
  });

  it("keep one state file each; a client says which server it found", async () => {
    const dir = await mkdtemp(join(tmpdir(), "polar-state-"));
    const env = { ...process.env, POLAR_STATE_DIR: dir, POLAR_STATE_FILE: "", POLAR_NATS_URL: "" };
    delete (env as Record<string, string | undefined>).POLAR_STATE_FILE;
    delete (env as Record<string, string | undefined>).POLAR_NATS_URL;
    const start = () => {
      const p = spawn(process.execPath, [POLAR, "up", "--http-port", "0", "--log-level", "warn"], { env, stdio: ["ignore", "pipe", "pipe"] });
      procs.push(p);
      let out = "";
      p.stdout!.on("data", (d) => (out += d));
      return { p, out: () => out };
    };
    const a = start();
    const b = start();
    await until("both instances ready", async () => (a.out().includes("ready;") && b.out().includes("ready;") ? true : undefined), 60_000);
    expect(a.out()).toMatch(/dashboard\s+http:\/\/127\.0\.0\.1:\d+\//);
    const files = (await readdir(dir)).sort();
    expect(files).toEqual([`${a.p.pid}.json`, `${b.p.pid}.json`].sort());
    const stateB = JSON.parse(await readFile(join(dir, `${b.p.pid}.json`), "utf8"));
    expect(stateB.dashboard_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);

    // Stopping one removes only its own file.
    a.p.kill("SIGTERM");
    await new Promise((r) => a.p.once("exit", r));
    expect(await readdir(dir)).toEqual([`${b.p.pid}.json`]);

    // A client with no server given finds the live instance and says so.
    const status = spawn(process.execPath, [POLAR, "status", "--json"], { env, stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    let out = "";
    status.stderr!.on("data", (d) => (err += d));
    status.stdout!.on("data", (d) => (out += d));
    const code = await new Promise((r) => status.once("exit", r));
    expect(code).toBe(0);
    expect(err).toContain(`polar: using NATS ${stateB.nats_url} of the polar up started by pid ${b.p.pid}`);
    expect(JSON.parse(out).nodes).toHaveLength(1);
    b.p.kill("SIGTERM");
    await new Promise((r) => b.p.once("exit", r));
    expect(await readdir(dir)).toEqual([]);
  }, 120_000);
});
