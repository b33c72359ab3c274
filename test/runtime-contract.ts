/**
 * The behaviour every runtime backend must show, as one vitest suite that a
 * backend's test file instantiates with its own factory.
 */
import { createHash } from "node:crypto";
import { lstat, mkdtemp, readFile, readdir, readlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import type { RuntimeSpec } from "../src/protocol/schemas.ts";
import type { Runtime } from "../src/runtimes/types.ts";
import { makeTree } from "./runtime-helpers.ts";

export interface ContractOptions {
  /** Creates and starts a runtime; the suite stops it. */
  make(spec?: Partial<RuntimeSpec>): Promise<Runtime>;
  /** Why limits cannot be applied on this host (the limits test is then skipped, with this message). */
  limitsUnavailable?: string;
}

export type Manifest = Record<string, string>;

/** type:mode:sha256 (or link target) of every entry under `root`. */
export async function manifest(root: string, rel = ""): Promise<Manifest> {
  const out: Manifest = {};
  for (const name of (await readdir(join(root, rel))).sort()) {
    const p = join(rel, name);
    const st = await lstat(join(root, p));
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isSymbolicLink()) out[p] = `link:${await readlink(join(root, p))}`;
    else if (st.isDirectory()) {
      out[p] = `dir:${mode}`;
      Object.assign(out, await manifest(root, p));
    } else out[p] = `file:${mode}:${createHash("sha256").update(await readFile(join(root, p))).digest("hex")}`;
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function runtimeContract(o: ContractOptions): void {
  const started: Runtime[] = [];
  const make = async (spec?: Partial<RuntimeSpec>) => {
    const rt = await o.make(spec);
    started.push(rt);
    return rt;
  };
  afterAll(async () => {
    await Promise.all(started.map((r) => r.stop()));
  });

  it("reports exit codes and keeps stdout and stderr apart", async () => {
    const rt = await make();
    const r = await rt.exec("echo to-out; echo to-err >&2; exit 3");
    expect(r).toMatchObject({ stdout: "to-out\n", stderr: "to-err\n", exitCode: 3, timedOut: false, cancelled: false });
    const ok = await rt.exec("printf '%s' \"$(cat)\"", { stdin: "piped input" });
    expect(ok.exitCode).toBe(0);
    expect(ok.stdout).toBe("piped input");
  });

  it("applies env, cwd, HOME and the spec env", async () => {
    const rt = await make({ env: { FROM_SPEC: "spec", OVERRIDDEN: "spec" } });
    await rt.exec("mkdir -p sub/dir");
    const r = await rt.exec('pwd; echo "$FOO|$FROM_SPEC|$OVERRIDDEN|$HOME"', { cwd: "sub/dir", env: { FOO: "b a r", OVERRIDDEN: "call" } });
    expect(r.stdout).toBe(`${rt.workdir}/sub/dir\nb a r|spec|call|${rt.home}\n`);
    const def = await rt.exec("pwd");
    expect(def.stdout.trim()).toBe(rt.workdir);
    const missing = await rt.exec("echo ran", { cwd: "no/such/dir" });
    expect(missing.exitCode).toBe(126);
    expect(missing.stdout).not.toContain("ran");
  });

  it("a timeout kills the whole process tree", async () => {
    const rt = await make();
    const t0 = performance.now();
    const cmd = "(while true; do echo x >> tick; sleep 0.05; done) & setsid sh -c 'while true; do echo y >> tick2; sleep 0.05; done' & sleep 30";
    const r = await rt.exec(cmd, { timeoutMs: 700 });
    expect(r.timedOut).toBe(true);
    expect(r.exitCode).toBe(-1);
    expect(performance.now() - t0).toBeLessThan(5000);
    await sleep(300);
    const a = [(await rt.readFile("tick")).length, (await rt.readFile("tick2")).length];
    await sleep(500);
    const b = [(await rt.readFile("tick")).length, (await rt.readFile("tick2")).length];
    expect(a[0]).toBeGreaterThan(0);
    expect(b).toEqual(a);
  });

  it("an aborted signal kills the exec and reports it cancelled", async () => {
    const rt = await make();
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300).unref();
    const r = await rt.exec("sleep 30", { signal: ac.signal });
    expect(r).toMatchObject({ exitCode: -1, cancelled: true });
    expect(r.durationMs).toBeLessThan(5000);
    const after = await rt.exec("echo still-usable");
    expect(after.stdout).toBe("still-usable\n");
  });

  it("cancel() kills in-flight execs, stops, and later calls reject", async () => {
    const rt = await make();
    const running = rt.exec("sleep 30; echo never");
    await sleep(400);
    const t0 = performance.now();
    await rt.cancel();
    const r = await running;
    expect(r).toMatchObject({ exitCode: -1, cancelled: true, stdout: "" });
    expect(performance.now() - t0).toBeLessThan(10_000);
    await expect(rt.exec("true")).rejects.toMatchObject({ code: "runtime" });
    await rt.stop(); // idempotent
    expect(rt.execStats()).toMatchObject({ cancelled: 1 });
  });

  it("upload and download round-trip trees byte for byte, modes and links kept", async () => {
    const rt = await make();
    const src = await mkdtemp(join(tmpdir(), "polar-src-"));
    await makeTree(src);
    await rt.upload(src, "up/tree");
    const inside = await rt.exec("cd up/tree && sha256sum bytes.bin sub/random.bin | cut -c1-64 && stat -c '%a %n' secret.txt sub/deeper sub/deeper/run.sh && readlink link && ./sub/deeper/run.sh");
    const want = await manifest(src);
    const hash = (k: string) => want[k].split(":")[2];
    expect(inside.stdout).toBe(`${hash("bytes.bin")}\n${hash("sub/random.bin")}\n600 secret.txt\n750 sub/deeper\n755 sub/deeper/run.sh\nbytes.bin\nhi\n`);
    const back = await mkdtemp(join(tmpdir(), "polar-back-"));
    await rt.download("up/tree", join(back, "tree"));
    expect(await manifest(join(back, "tree"))).toEqual(want);
    await rt.upload(join(src, "sub/random.bin"), "single/r.bin");
    await rt.download("single/r.bin", join(back, "r.bin"));
    expect(await readFile(join(back, "r.bin"))).toEqual(await readFile(join(src, "sub/random.bin")));
  });

  it("writeFile and readFile keep binary content and modes", async () => {
    const rt = await make();
    const bytes = new Uint8Array(70_000).map((_, i) => (i * 7) % 256);
    await rt.writeFile("w/data.bin", bytes, 0o640);
    expect(await rt.readFile("w/data.bin")).toEqual(bytes);
    const r = await rt.exec("stat -c %a w/data.bin && wc -c < w/data.bin");
    expect(r.stdout).toBe("640\n70000\n");
    await rt.writeFile(`${rt.home}/.config/x.json`, '{"a":1}');
    expect((await rt.exec("cat ~/.config/x.json")).stdout).toBe('{"a":1}');
    await expect(rt.readFile("missing/file")).rejects.toMatchObject({ code: "runtime" });
  });

  if (o.limitsUnavailable) console.warn(`[runtime-contract] limits test SKIPPED: ${o.limitsUnavailable}`);
  it.skipIf(o.limitsUnavailable !== undefined)("limits are visible and enforced inside the sandbox", async () => {
    const rt = await make({ cpus: 1, memory_mb: 128, pids_limit: 40 });
    const r = await rt.exec(CGROUP_LIMITS_SCRIPT);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe(`memory ${128 * 1024 * 1024}\npids 40\ncpu 100000 100000\n`);
    const fork = await rt.exec("for i in $(seq 60); do sleep 2 & done 2>&1; wait", { timeoutMs: 20_000 });
    expect(fork.stdout + fork.stderr).toMatch(/Resource temporarily unavailable|retry|fork/i);
    const oom = await rt.exec("head -c 400m /dev/zero | tail > /dev/null", { timeoutMs: 30_000 });
    expect(oom.exitCode).not.toBe(0);
    expect(oom.timedOut).toBe(false);
  });

  it("counts execs by category", async () => {
    const rt = await make();
    await rt.exec("true", { category: "prepare" });
    await rt.exec("false", { category: "agent" });
    await rt.exec("sleep 5", { category: "agent", timeoutMs: 100 });
    const s = rt.execStats();
    expect(s).toMatchObject({ count: 3, failures: 1, timeouts: 1, countByCategory: { prepare: 1, agent: 2 } });
    expect(s.msByCategory.agent).toBeGreaterThanOrEqual(100);
  });
}

/**
 * Prints the memory, pids and cpu limits of the cgroup the shell runs in, for
 * cgroup v2 or v1, whether the cgroup namespace is private or not.
 */
export const CGROUP_LIMITS_SCRIPT = String.raw`
find_file() { # $1 controller (v1) $2 file
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then p=$(grep '^0::' /proc/self/cgroup | cut -d: -f3); base=/sys/fs/cgroup
  else p=$(awk -F: -v c="$1" '{ n=split($2,a,","); for(i=1;i<=n;i++) if (a[i]==c) print $3 }' /proc/self/cgroup); base=/sys/fs/cgroup/$1; fi
  for d in "$base$p" "$base"; do [ -f "$d/$2" ] && { cat "$d/$2"; return; }; done; echo "missing $1 $2" >&2
}
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  echo "memory $(find_file memory memory.max)"; echo "pids $(find_file pids pids.max)"; set -- $(find_file cpu cpu.max); echo "cpu $1 $2"
else
  echo "memory $(find_file memory memory.limit_in_bytes)"; echo "pids $(find_file pids pids.max)"; echo "cpu $(find_file cpu cpu.cfs_quota_us) $(find_file cpu cpu.cfs_period_us)"
fi
`;
