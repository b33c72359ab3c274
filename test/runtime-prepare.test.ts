import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrepareAction, RuntimeSpec } from "../src/protocol/schemas.ts";
import { LocalRuntime } from "../src/runtimes/local.ts";
import { runPrepare } from "../src/runtimes/prepare.ts";
import { silentLogger } from "../src/util/log.ts";
import { makeCtx, makeSessionDir } from "./runtime-helpers.ts";

let rt: LocalRuntime;
let src: string;
const dirs: string[] = [];
const log = silentLogger();
const signal = new AbortController().signal;
const actions = (a: unknown[]) => a.map((x) => PrepareAction.parse(x));

beforeAll(async () => {
  const dir = await makeSessionDir();
  src = await mkdtemp(join(tmpdir(), "polar-prep-src-"));
  dirs.push(dir, src);
  await mkdir(join(src, "pkg/lib"), { recursive: true });
  await writeFile(join(src, "pkg/lib/a.txt"), "A");
  await writeFile(join(src, "one.txt"), "ONE");
  rt = new LocalRuntime(RuntimeSpec.parse({ backend: "local", kwargs: { isolation: "none" } }), makeCtx(dir, { url: "http://127.0.0.1:9" }));
  await rt.start();
});
afterAll(async () => {
  await rt.stop();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

describe("runPrepare", () => {
  it("uploads a file and a directory, then runs commands with their cwd and env", async () => {
    await runPrepare(
      rt,
      actions([
        { type: "upload_file", source: join(src, "one.txt"), target: "in/one.txt" },
        { type: "upload_dir", source: join(src, "pkg"), target: "in/pkg" },
        { type: "exec", command: 'cat one.txt pkg/lib/a.txt > out.txt; echo "$X" >> out.txt', cwd: "in", env: { X: "ex" } },
      ]),
      { signal, log },
    );
    expect(new TextDecoder().decode(await rt.readFile("in/out.txt"))).toBe("ONEAex\n");
    expect(rt.execStats().countByCategory.prepare).toBe(1);
  });

  it("retries a failing exec with exponential backoff until it succeeds", async () => {
    const t0 = performance.now();
    await runPrepare(
      rt,
      actions([{ type: "exec", command: "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; date +%s%N >> times; [ $n -ge 3 ]", max_attempts: 4, retry_backoff_seconds: 0.2 }]),
      { signal, log },
    );
    const elapsed = performance.now() - t0;
    expect(new TextDecoder().decode(await rt.readFile("count"))).toBe("3\n");
    const times = new TextDecoder().decode(await rt.readFile("times")).trim().split("\n").map((t) => Number(BigInt(t) / 1_000_000n));
    expect(times[1] - times[0]).toBeGreaterThanOrEqual(190); // 0.2 s
    expect(times[2] - times[1]).toBeGreaterThanOrEqual(390); // 0.4 s
    expect(elapsed).toBeLessThan(3000);
  });

  it("rejects with a runtime error naming the action that failed", async () => {
    const err = await runPrepare(
      rt,
      actions([
        { type: "exec", command: "true" },
        { type: "exec", command: "echo boom >&2; exit 7", max_attempts: 2 },
        { type: "exec", command: "touch never-run" },
      ]),
      { signal, log },
    ).catch((e) => e);
    expect(err).toMatchObject({ code: "runtime", details: { index: 1, type: "exec", exitCode: 7 } });
    expect(err.message).toContain("prepare action 1 (exec \"echo boom >&2; exit 7\") failed after 2 attempt(s): exit code 7: boom");
    await expect(rt.readFile("never-run")).rejects.toMatchObject({ code: "runtime" });
  });

  it("rejects an upload whose source is missing or of the wrong kind", async () => {
    await expect(runPrepare(rt, actions([{ type: "upload_dir", source: join(src, "one.txt"), target: "x" }]), { signal, log })).rejects.toMatchObject({
      code: "runtime",
      message: expect.stringContaining("source is not a directory"),
    });
    await expect(runPrepare(rt, actions([{ type: "upload_file", source: join(src, "nope"), target: "x" }]), { signal, log })).rejects.toMatchObject({
      code: "runtime",
      details: { index: 0, type: "upload_file" },
    });
  });

  it("stops at once when the signal fires, with the signal's reason", async () => {
    const ac = new AbortController();
    const reason = new Error("session budget exhausted");
    setTimeout(() => ac.abort(reason), 300).unref();
    const t0 = performance.now();
    const err = await runPrepare(rt, actions([{ type: "exec", command: "sleep 20" }, { type: "exec", command: "touch after-abort" }]), { signal: ac.signal, log }).catch((e) => e);
    expect(err).toBe(reason);
    expect(performance.now() - t0).toBeLessThan(3000);
    await expect(readFile(join(rt.workdir, "after-abort"))).rejects.toThrow();
  });
});
