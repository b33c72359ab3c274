/**
 * Submit-time bounds: every duration, number, id, string, list and nesting
 * depth a task carries is bounded; a task over a bound is refused with 400
 * naming the limit, over HTTP and over NATS, and nothing is stored. Fields
 * the server does not implement are refused with the field named.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeHeaders } from "../src/protocol/codec.ts";
import { errorFromWire, type PolarError } from "../src/protocol/errors.ts";
import { LIMITS } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

function task(task_id: string, extra: Record<string, unknown> = {}) {
  return {
    task_id,
    instruction: "hi",
    pool: "nobody-serves-validation",
    runtime: { backend: "local" },
    agent: { harness: "shell", custom_shell: { command: "true" } },
    ...extra,
  };
}

/** An object nested `depth` levels deep, as a value (small depths) or as JSON text (any depth: no recursive stringify). */
function nested(depth: number): Record<string, unknown> {
  let v: Record<string, unknown> = { leaf: 1 };
  for (let i = 1; i < depth; i++) v = { k: v };
  return v;
}
const DEEP = "__deep__";
function withDeep(t: Record<string, unknown>, depth: number): string {
  return JSON.stringify(t).replace(JSON.stringify(DEEP), `${'{"k":'.repeat(depth - 1)}{"leaf":1}${"}".repeat(depth - 1)}`);
}

describe("supervisor: validation bounds", () => {
  let sys: TestSystem;
  let api: string;

  beforeAll(async () => {
    sys = await startTestSystem();
    api = (await sys.startSupervisor()).httpUrl!;
  });
  afterAll(async () => {
    await sys?.stop();
  });

  async function post(body: unknown): Promise<{ status: number; body: any }> {
    const text = typeof body === "string" ? body : JSON.stringify(body);
    const res = await fetch(`${api}/rollout/task/submit`, { method: "POST", headers: { "content-type": "application/json" }, body: text });
    return { status: res.status, body: await res.json() };
  }

  /** Submits JSON text over NATS as a JSON client would; resolves with the typed error or undefined. */
  async function natsSubmit(text: string): Promise<PolarError | undefined> {
    const msg = await sys.client.request(SUBJECTS.api.submit, new TextEncoder().encode(text), { timeout: 10_000, headers: makeHeaders("application/json") });
    const reply = JSON.parse(new TextDecoder().decode(msg.data));
    return reply.ok ? undefined : errorFromWire(reply.error);
  }

  async function expectNotStored(taskId: string) {
    const res = await fetch(`${api}/rollout/task/${encodeURIComponent(taskId)}`);
    expect(res.status).toBe(404);
  }

  async function refused(t: Record<string, unknown>, path: string, limit: RegExp, depth = 0) {
    const text = (x: Record<string, unknown>) => (depth ? withDeep(x, depth) : JSON.stringify(x));
    const http = await post(text(t));
    expect(http.status, JSON.stringify(http.body)).toBe(400);
    expect(http.body.error.code).toBe("validation");
    const issue = http.body.error.details.issues.find((i: { path: string }) => i.path === path);
    expect(issue, JSON.stringify(http.body.error.details.issues)).toBeDefined();
    expect(issue.message).toMatch(limit);
    // JSON on the wire: msgpack encoders recurse and cannot even write a value this deep.
    const err = await natsSubmit(text({ ...t, task_id: `${t.task_id}-nats` }));
    expect(err?.code).toBe("validation");
    expect(err?.message).toContain(path);
    await expectNotStored(t.task_id as string);
    await expectNotStored(`${t.task_id}-nats`);
  }

  it("refuses metadata, settings and env nested 2,000 and 5,000 deep, naming the limit", async () => {
    await refused(task("deep-2000", { metadata: DEEP }), "metadata", new RegExp(`limit of ${LIMITS.maxDepth} levels`), 2000);
    await refused(task("deep-5000", { metadata: DEEP }), "metadata", /limit of 32 levels/, 5000);
    await refused(task("deep-env", { agent: { harness: "shell", custom_shell: { command: "true", env: DEEP } } }), "agent.custom_shell.env.k", /expected string/, 2000);
    await refused(
      task("deep-settings", { agent: { harness: "shell", custom_shell: { command: "true" }, settings: nested(40) } }),
      "agent.settings",
      /limit of 32 levels/,
    );
    await refused(task("deep-kwargs", { runtime: { backend: "local", kwargs: nested(33) } }), "runtime.kwargs", /limit of 32 levels/);
    // 32 levels is within the limit.
    const ok = await post(task("deep-32", { metadata: nested(31) }));
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
  });

  it("refuses budgets that would overflow a timer or never end, naming the limit", async () => {
    await refused(task("budget-3e6", { timeout_seconds: 3_000_000 }), "timeout_seconds", /<=\s?604800/);
    await refused(task("budget-1e308", { timeout_seconds: 1e308 }), "timeout_seconds", /<=\s?604800/);
    await refused(task("queue-1e308", { queue_timeout_seconds: 1e308 }), "queue_timeout_seconds", /<=\s?604800/);
    await refused(
      task("agent-timeout", { metadata: { agent_timeout: 1e12 } }),
      "metadata.agent_timeout",
      /<= 604800/,
    );
    await refused(
      task("exec-timeout", { agent: { harness: "shell", custom_shell: { command: "true", timeout_seconds: 1e9 } } }),
      "agent.custom_shell.timeout_seconds",
      /<=\s?604800/,
    );
    await refused(task("samples", { num_samples: 10_001 }), "num_samples", /<=\s?10000/);
  });

  it("bounds ids, strings, env maps and lists", async () => {
    const longId = `t${"x".repeat(128)}`;
    const http = await post(task(longId));
    expect(http.status).toBe(400);
    expect(http.body.error.details.issues[0].path).toBe("task_id");
    await refused(task("long-instruction", { instruction: "x".repeat(LIMITS.instructionChars + 1) }), "instruction", /262144/);
    await refused(
      task("long-env", { agent: { harness: "shell", custom_shell: { command: "true" }, env: { A: "x".repeat(LIMITS.envValueChars + 1) } } }),
      "agent.env.A",
      /65536/,
    );
    const manyEnv = Object.fromEntries(Array.from({ length: LIMITS.envEntries + 1 }, (_, i) => [`V${i}`, "1"]));
    await refused(task("many-env", { agent: { harness: "shell", custom_shell: { command: "true" }, env: manyEnv } }), "agent.env", /512 entries/);
    const prepare = Array.from({ length: LIMITS.listItems + 1 }, () => ({ type: "exec", command: "true" }));
    await refused(task("many-prepare", { runtime: { backend: "local", prepare } }), "runtime.prepare", /256/);
  });

  it("refuses fields the server does not implement, naming them", async () => {
    await refused(task("import-path", { agent: { import_path: "my.module:Agent" } }), "agent.import_path", /not supported/);
    await refused(task("rt-import", { runtime: { backend: "local", import_path: "x:Y" } }), "runtime.import_path", /not supported/);
    await refused(task("rt-init", { runtime: { backend: "local", direct_exec_init_command: "init" } }), "runtime.direct_exec_init_command", /not supported/);
    await refused(task("rt-storage", { runtime: { backend: "local", storage_mb: 100 } }), "runtime.storage_mb", /not supported/);
  });

  it("refuses a metadata.eval_sampling_seed_base that is not a small non-negative integer", async () => {
    await refused(task("seed-bad", { metadata: { eval_sampling_seed_base: 1.5 } }), "metadata.eval_sampling_seed_base", /integer/);
  });
});
