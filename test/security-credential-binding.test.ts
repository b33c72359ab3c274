/**
 * A proxy credential is useless outside its own sandbox. Two sessions run at
 * once through a real gateway, proxy and sim; session B gets hold of A's
 * credential and calls the model with it. Under `isolation: none` B reads it
 * from /proc/<A's pid>/environ and tries the proxy's TCP port, the shared
 * socket and A's own socket; under bubblewrap B cannot see A's processes or
 * socket at all, and the credential, handed to it through its task, is
 * refused on B's own socket. Every try answers 403 in the OpenAI error
 * format; A's trajectory holds only A's call and B's call reaches no engine
 * and no trajectory.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionResult, TaskStatus } from "../src/protocol/schemas.ts";
import { request } from "../src/nats/messages.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { probeBwrap } from "../src/runtimes/bwrap.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";
import { waitFor, waitTaskDone } from "./helpers/gateway.ts";

const CLIENT = fileURLToPath(new URL("../config/examples/chat-client.mjs", import.meta.url));

/**
 * Calls the model with the credential in $STOLEN: over OPENAI_BASE_URL, then
 * (argv) over each Unix socket named; prints one JSON line per try.
 */
const STEAL_JS = `
import http from "node:http";
const key = process.env.STOLEN;
const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "STOLEN-CALL" }], max_tokens: 8 });
const headers = { authorization: "Bearer " + key, "content-type": "application/json" };
const tries = [{ via: "tcp", url: new URL(process.env.OPENAI_BASE_URL + "/chat/completions") }];
for (const socketPath of process.argv.slice(1)) tries.push({ via: socketPath, socketPath });
for (const t of tries) {
  const r = await new Promise((resolve) => {
    const where = t.socketPath ? { socketPath: t.socketPath, path: "/v1/chat/completions" } : { host: t.url.hostname, port: t.url.port, path: t.url.pathname };
    const req = http.request({ ...where, method: "POST", headers }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve({ via: t.via, status: res.statusCode, body: JSON.parse(text) }));
    });
    req.on("error", (e) => resolve({ via: t.via, status: 0, error: e.message }));
    req.end(body);
  });
  console.log(JSON.stringify(r));
}
`;

let sys: TestSystem;
let work: string;
let shared: string;

function shellTask(task_id: string, runtime: Record<string, unknown>, command: string, env: Record<string, string> = {}) {
  return {
    task_id,
    instruction: `Task ${task_id}: say hello.`,
    num_samples: 1,
    timeout_seconds: 90,
    runtime: { backend: "local", ...runtime },
    agent: { harness: "shell", custom_shell: { command, env: { TURNS: "1", STEAL_JS, ...env } } },
    builder: { strategy: "per_request" },
  };
}

async function submit(task: Record<string, unknown>): Promise<void> {
  await request(sys.client, SUBJECTS.api.submit, task);
}

function resultOf(st: TaskStatus): SessionResult {
  expect(st.results).toHaveLength(1);
  return st.results![0];
}

/** Lines of JSON the steal script printed. */
function tries(out: string): Array<{ via: string; status: number; body?: any; error?: string }> {
  return out.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

function stolenCalls(): number {
  return sys.upstream.exchanges.filter((e) => JSON.stringify(e.request).includes("STOLEN-CALL")).length;
}

beforeAll(async () => {
  if (!probeBwrap()) throw new Error("bubblewrap is required for the sandbox tests (Debian package bubblewrap)");
  work = await mkdtemp(join(tmpdir(), "polar-sec-bind-"));
  shared = join(work, "shared");
  await mkdir(shared);
  sys = await startTestSystem();
  await sys.startSupervisor();
  await sys.startGateway({ workRoot: join(work, "gw"), keepSessionDirs: true, limits: { maxRunWorkers: 2, maxInitWorkers: 2 } });
}, 60_000);

afterAll(async () => {
  await sys?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("a proxy credential is bound to its own sandbox", () => {
  it("isolation none: a credential read from another session's /proc environ is refused on every path and records nothing", async () => {
    const none = { kwargs: { isolation: "none" } };
    const before = sys.upstream.exchanges.length;
    const a = `echo $$ > ${shared}/a.pid && node ${CLIENT} && for i in $(seq 1 1200); do [ -e ${shared}/b.done ] && break; sleep 0.05; done`;
    const b = [
      `for i in $(seq 1 1200); do [ -s ${shared}/a.pid ] && break; sleep 0.05; done`,
      `export STOLEN=$(tr '\\0' '\\n' < /proc/$(cat ${shared}/a.pid)/environ | sed -n 's/^OPENAI_API_KEY=//p')`,
      `echo "$STOLEN" > ${shared}/stolen.txt`,
      `node --input-type=module -e "$STEAL_JS" ${join(work, "gw", "proxy.sock")} ${join(work, "gw", "sockets")}/*.sock > ${shared}/b.out 2>&1`,
      `touch ${shared}/b.done`,
    ].join("\n");
    await submit(shellTask("bind-none-a", none, a));
    await submit(shellTask("bind-none-b", none, b));
    const [stA, stB] = await Promise.all([waitTaskDone(sys, "bind-none-a", 90_000), waitTaskDone(sys, "bind-none-b", 90_000)]);

    const stolen = (await readFile(join(shared, "stolen.txt"), "utf8")).trim();
    expect(stolen).toMatch(/^sk-polar-/); // B really held A's live credential
    const out = tries(await readFile(join(shared, "b.out"), "utf8"));
    // TCP, the shared socket and A's own socket (B's socket too, which refuses it the same way)
    expect(out.map((t) => t.via).slice(0, 2)).toEqual(["tcp", join(work, "gw", "proxy.sock")]);
    expect(out.length).toBeGreaterThanOrEqual(3);
    for (const t of out) {
      expect(t.status, JSON.stringify(t)).toBe(403);
      expect(t.body.error).toMatchObject({ type: "permission_error", code: "credential_bound_elsewhere" });
      expect(typeof t.body.error.message).toBe("string");
    }

    const ra = resultOf(stA);
    const rb = resultOf(stB);
    expect(ra.status).toBe("COMPLETED");
    expect(ra.trajectory.traces).toHaveLength(1); // A's one call, not B's
    expect(rb.trajectory.traces).toHaveLength(0);
    // The proxy's own share is recorded: the TCP peer check, within the time before the call went upstream.
    const timing = ra.completion_session!.completions[0].metadata.inference_timings as Record<string, number>;
    expect(timing.admit_ms).toBeGreaterThan(0);
    expect(timing.proxy_in_ms).toBeGreaterThanOrEqual(timing.admit_ms);
    expect(timing.upstream_ms).toBeGreaterThan(0);
    expect(sys.upstream.exchanges.length - before).toBe(1);
    expect(stolenCalls()).toBe(0);
    const aPrompt = JSON.stringify(sys.upstream.exchanges.at(-1)!.request);
    expect(aPrompt).toContain("bind-none-a");
  }, 120_000);

  it("bubblewrap: B cannot see A's processes or socket, and A's credential handed to B is refused on B's socket", async () => {
    const bw = { kwargs: { isolation: "bwrap" } };
    const before = sys.upstream.exchanges.length;
    const stolenBefore = stolenCalls();
    const a = `echo "$OPENAI_API_KEY" > key.txt && node ${CLIENT} && for i in $(seq 1 1200); do [ -e release ] && break; sleep 0.05; done`;
    await submit(shellTask("bind-bwrap-a", bw, a));
    const gw = join(work, "gw");
    const keyFile = await waitFor("A's credential in its workspace", async () => {
      for (const d of await readdir(gw)) {
        const f = join(gw, d, "workspace", "key.txt");
        if (existsSync(f) && (await readFile(f, "utf8")).trim()) return f;
      }
      return undefined;
    }, 60_000);
    const aWorkspace = join(keyFile, "..");
    const key = (await readFile(keyFile, "utf8")).trim();
    expect(key).toMatch(/^sk-polar-/);
    const b = [
      // A's processes (and anything holding A's credential) are not in B's /proc
      `grep -l "OPENAI_API_KEY=$STOLEN" /proc/[0-9]*/environ 2>/dev/null | wc -l > seen.txt`,
      `ls ${join(gw, "sockets")} > sockets.txt 2>&1`,
      `node --input-type=module -e "$STEAL_JS" > b.out 2>&1`,
    ].join("\n");
    await submit(shellTask("bind-bwrap-b", bw, b, { STOLEN: key }));
    const stB = await waitTaskDone(sys, "bind-bwrap-b", 90_000);
    await writeFile(join(aWorkspace, "release"), "");
    const stA = await waitTaskDone(sys, "bind-bwrap-a", 90_000);

    const bDir = (await readdir(gw)).map((d) => join(gw, d, "workspace")).find((d) => existsSync(join(d, "b.out")) && d !== aWorkspace)!;
    expect(bDir).toBeDefined();
    expect((await readFile(join(bDir, "seen.txt"), "utf8")).trim()).toBe("0");
    expect((await readFile(join(bDir, "sockets.txt"), "utf8")).trim().split("\n")).toHaveLength(1); // its own socket only
    const out = tries(await readFile(join(bDir, "b.out"), "utf8"));
    expect(out).toHaveLength(1);
    expect(out[0].status, JSON.stringify(out[0])).toBe(403);
    expect(out[0].body.error).toMatchObject({ type: "permission_error", code: "credential_bound_elsewhere" });

    const ra = resultOf(stA);
    expect(ra.status).toBe("COMPLETED");
    expect(ra.trajectory.traces).toHaveLength(1);
    expect(resultOf(stB).trajectory.traces).toHaveLength(0);
    expect(sys.upstream.exchanges.length - before).toBe(1);
    expect(stolenCalls()).toBe(stolenBefore);
  }, 150_000);
});
