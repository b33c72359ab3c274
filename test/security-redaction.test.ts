/**
 * Secrets stay out of logs, error messages and stored artifacts. A real
 * `polar up` child process (embedded nats-server with per-role passwords,
 * supervisor with a bearer token, gateway, sim) runs with a secret env value
 * declared in `security.secret_env_names` holding a unique canary. A session
 * prints the canary, its own credential and fails; error paths are hit (a
 * proxy call with the canary as credential, an API call with the canary as
 * bearer token, a refused callback URL carrying it). Then the bytes of every
 * place a secret could end up are grepped: everything the process printed
 * (debug logs, JSON), every API answer, the session's step logs, and the
 * whole JetStream store (task records, results, traces, CompletionRecords,
 * object store blobs). A positive control proves the agent's output was kept
 * (with the secret cut out), so the grep is not looking at nothing.
 */
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnPolar, type PolarProcess } from "./helpers/cli-process.ts";

const CANARY = `canary-${Math.random().toString(36).slice(2)}-c4n4ry`;
const TOKEN = `api-token-${Math.random().toString(36).slice(2)}-0123456789`;
const TASK = "redaction-run";

let dir: string;
let proc: PolarProcess;
let api: string;
let proxy: string;
let storeRoot: string;
let secrets: Record<string, string>;
const answers: string[] = [];

async function call(method: string, url: string, body?: unknown, auth = TOKEN): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { method, body: body === undefined ? undefined : JSON.stringify(body), headers: { authorization: `Bearer ${auth}`, "content-type": "application/json" } });
  const text = await res.text();
  answers.push(`${method} ${url} ${res.status} ${text}`);
  return { status: res.status, text };
}

/** Every file under `root`, with its bytes. */
async function filesUnder(root: string): Promise<Array<[string, Buffer]>> {
  const out: Array<[string, Buffer]> = [];
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile() && (await stat(p)).size < 256 * 1024 * 1024) out.push([p, await readFile(p)]);
    }
  };
  await walk(root);
  return out;
}

function leaks(haystack: string | Buffer): string[] {
  const text = typeof haystack === "string" ? haystack : haystack.toString("latin1");
  return Object.entries(secrets).filter(([, v]) => text.includes(v) || text.includes(JSON.stringify(v).slice(1, -1))).map(([k]) => k);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "polar-sec-redact-"));
  storeRoot = join(dir, "tmp");
  await mkdir(storeRoot);
  const script = join(dir, "leaky-agent.mjs");
  await writeFile(
    script,
    `const canary = process.env.POLAR_TEST_CANARY;
const key = process.env.OPENAI_API_KEY;
console.log("marker-out " + canary + " end-out");
console.error("marker-err " + canary + " end-err " + key);
const post = (auth, body) => fetch(process.env.OPENAI_BASE_URL + "/chat/completions", { method: "POST", headers: { authorization: "Bearer " + auth, "content-type": "application/json" }, body: JSON.stringify(body) }).then((r) => r.text());
// A capture to store, an unknown credential, a refused body naming the canary.
console.log(await post(key, { model: "m", max_tokens: 8, messages: [{ role: "user", content: "say hello" }] }));
console.log(await post(canary, { model: "m", messages: [{ role: "user", content: "x" }] }));
console.log(await post(key, { model: canary, messages: canary }));
process.exit(3);
`,
  );
  const config = join(dir, "polar.json");
  await writeFile(
    config,
    JSON.stringify({
      supervisor: { http_port: 0 },
      gateway: { work_root: join(dir, "work"), keep_session_dirs: true, default_runtime: { backend: "local", kwargs: { isolation: "none" } } },
      security: { secret_env_names: ["POLAR_TEST_CANARY"], upload_roots: [dir] },
    }),
  );
  proc = spawnPolar(["up", "--config", config, "--log-level", "debug"], {
    POLAR_TEST_CANARY: CANARY,
    POLAR_API_TOKEN: TOKEN,
    POLAR_STATE_FILE: join(dir, "state.json"),
    POLAR_LOG_FORMAT: "json",
    TMPDIR: storeRoot,
  });
  api = (await proc.waitFor(/task API\s+(http\S+)/, 60_000))[1];
  proxy = (await proc.waitFor(/model proxy\s+(http\S+)/, 5_000))[1];
  const state = JSON.parse(await readFile(join(dir, "state.json"), "utf8"));
  secrets = { canary: CANARY, api_token: TOKEN };
  for (const [role, c] of Object.entries(state.nats_credentials as Record<string, { password: string }>)) secrets[`nats_${role}`] = c.password;
  expect(Object.keys(secrets).length).toBeGreaterThanOrEqual(5);
}, 90_000);

afterAll(async () => {
  proc?.signal("SIGKILL", true);
  await proc?.exited;
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("secrets stay out of logs, errors and artifacts", () => {
  it("a failing session that prints the secret and hits error paths leaks it nowhere", { timeout: 120_000 }, async () => {
    // Error paths of the API: the canary as a bearer token, inside a refused callback URL, as a bad task id.
    expect((await call("GET", `${api}/rollout/status`, undefined, CANARY)).status).toBe(401);
    expect((await call("POST", `${api}/rollout/task/submit`, { task_id: "cb", instruction: "x", callback_url: `http://u:${CANARY}@example.com/` })).status).toBe(400);
    expect((await call("POST", `${api}/rollout/task/submit`, { task_id: `${CANARY}*`, instruction: "x" })).status).toBe(400);
    expect((await call("POST", `${proxy}/v1/chat/completions`, { messages: [] }, CANARY)).status).toBe(401);

    const submit = await call("POST", `${api}/rollout/task/submit`, {
      task_id: TASK, instruction: "leak it", num_samples: 1, timeout_seconds: 120,
      agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(join(dir, "leaky-agent.mjs"))}` } },
    });
    expect(submit.status, submit.text).toBe(200);
    const deadline = Date.now() + 90_000;
    let status: any;
    for (;;) {
      status = JSON.parse((await call("GET", `${api}/rollout/task/${TASK}?results=true`)).text);
      if (["completed", "failed"].includes(status.status)) break;
      if (Date.now() > deadline) throw new Error(`task not done: ${JSON.stringify(status).slice(0, 500)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    // Positive control: the agent ran with the secret, printed it and failed; its output was kept, redacted.
    const agent = status.results[0].agent_result;
    expect(agent.return_code, JSON.stringify(agent)).toBe(3);
    expect(agent.metadata.stdout_tail).toContain("marker-out [redacted] end-out");
    expect(agent.metadata.stderr_tail).toContain("marker-err [redacted] end-err [redacted]");
    await call("GET", `${api}/rollout/task/${TASK}/results`);
    await call("GET", `${api}/rollout/task/${TASK}/traces`);
    await call("GET", `${api}/dashboard/api/task/${TASK}`);
    await call("GET", `${api}/dashboard/api/trace/${TASK}/${status.sessions[0].session_id}`);

    // Every answer the API and the proxy gave.
    for (const a of answers) expect(leaks(a), a.slice(0, 300)).toEqual([]);
    // The session's step logs (kept on disk) hold the output, redacted.
    const work = await filesUnder(join(dir, "work"));
    const stepLogs = work.filter(([p]) => /step\.\d+\.std(out|err)\.log$/.test(p));
    expect(stepLogs.length).toBeGreaterThanOrEqual(2);
    expect(Buffer.concat(stepLogs.map(([, b]) => b)).toString()).toContain("marker-out [redacted] end-out");
    for (const [p, bytes] of work) expect(leaks(bytes), p).toEqual([]);
    // The whole JetStream store: task records, dispatches, results, traces, CompletionRecords, blobs.
    const store = (await filesUnder(storeRoot)).filter(([p]) => p.includes("jetstream"));
    const all = Buffer.concat(store.map(([, b]) => b));
    expect(all.includes(Buffer.from(TASK)), "the store holds the task").toBe(true);
    expect(all.includes(Buffer.from("marker-out [redacted] end-out")), "the store holds the redacted output").toBe(true);
    for (const [p, bytes] of store) expect(leaks(bytes), p).toEqual([]);
    // Everything `polar up` printed (debug level, JSON lines), after it stops.
    proc.signal("SIGTERM");
    await proc.exited;
    const out = proc.output();
    expect(out).toContain("session"); // it did log the session at debug level
    for (const line of out.split("\n")) expect(leaks(line), line.slice(0, 300)).toEqual([]);
  });
});

describe("the logger", () => {
  it("replaces every registered secret value in any field or message, plain and JSON-escaped, in JSON and pretty output", async () => {
    const { PassThrough } = await import("node:stream");
    const { createLogger } = await import("../src/util/log.ts");
    const { registerSecret } = await import("../src/security/redact.ts");
    const suffix = Math.random().toString(36).slice(2);
    const secret = `s3cr3t-"quoted"\\-${suffix}`;
    registerSecret(secret, "short");
    for (const format of ["json", "pretty"] as const) {
      const sink = new PassThrough();
      let out = "";
      sink.on("data", (d: Buffer) => (out += d.toString()));
      const log = createLogger({ destination: sink, format, level: "info" });
      log.info({ nested: { deep: [`x${secret}y`] }, err: new Error(`failed with ${secret}`) }, `message ${secret}`);
      log.info("short stays");
      await new Promise((r) => setTimeout(r, 20));
      expect(out, format).not.toContain(suffix);
      expect(out.match(/\[redacted\]/g)?.length, format).toBeGreaterThanOrEqual(3);
      expect(out, format).toContain("short stays"); // values under 8 characters are not secrets
    }
  });
});
