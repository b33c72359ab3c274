/**
 * Prometheus metrics at `/metrics` of the supervisor and of a gateway (its
 * proxy's HTTP server), scraped before and after a real task: the values move
 * with it, in the text exposition format with Prometheus' naming.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "../src/nats/messages.ts";
import type { TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const CLIENT = join(fileURLToPath(new URL("..", import.meta.url)), "config/examples/chat-client.mjs");

/** Parses the text format into `name{labels}` → value (samples only, comments skipped). */
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

function value(m: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const [k, v] of m) {
    const [n, rest = ""] = k.split("{");
    if (n !== name) continue;
    if (Object.entries(labels).every(([lk, lv]) => rest.includes(`${lk}="${lv}"`))) total += v;
  }
  return total;
}

async function scrape(url: string): Promise<{ type: string; m: Map<string, number>; text: string }> {
  const r = await fetch(`${url}/metrics`);
  expect(r.status).toBe(200);
  const text = await r.text();
  return { type: r.headers.get("content-type") ?? "", m: parse(text), text };
}

describe("Prometheus metrics", () => {
  let sys: TestSystem;
  let api: string;
  let proxy: string;

  beforeAll(async () => {
    sys = await startTestSystem();
    api = (await sys.startSupervisor()).httpUrl!;
    proxy = (await sys.startGateway({ limits: { maxRunWorkers: 3, maxInitWorkers: 2, maxPostrunWorkers: 2 } })).proxyUrl;
  }, 60_000);
  afterAll(() => sys?.stop());

  it("move with a task on the supervisor and the gateway", async () => {
    const sup0 = await scrape(api);
    const gw0 = await scrape(proxy);
    expect(sup0.type).toContain("text/plain");
    expect(gw0.text).toContain("# TYPE polar_proxy_upstream_request_duration_seconds histogram");
    expect(value(gw0.m, "polar_gateway_stage_capacity", { stage: "run" })).toBe(3);
    expect(value(gw0.m, "polar_gateway_stage_capacity", { stage: "init" })).toBe(2);
    expect(value(gw0.m, "polar_gateway_stage_capacity", { stage: "postrun" })).toBe(2);
    expect(value(sup0.m, "polar_nodes", { healthy: "true" })).toBe(1);

    // A call with an unknown credential is an error in the OpenAI dialect.
    const bad = await fetch(`${proxy}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer nope", "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(bad.status).toBe(401);

    const task = {
      task_id: "metrics-task",
      instruction: "say hello",
      num_samples: 3,
      timeout_seconds: 60,
      runtime: { backend: "local" },
      agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(CLIENT)}`, env: { TURNS: "2" } } },
      builder: { strategy: "per_request" },
    };
    await request(sys.client, SUBJECTS.api.submit, task);
    const deadline = Date.now() + 45_000;
    let st: TaskStatus | undefined;
    while (Date.now() < deadline) {
      st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: "metrics-task", with_results: true });
      if (st.status === "completed") break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(st?.status).toBe("completed");
    expect(st!.sessions.every((s) => s.status === "COMPLETED")).toBe(true);

    const sup1 = await scrape(api);
    const gw1 = await scrape(proxy);
    expect(value(sup1.m, "polar_tasks_submitted_total") - value(sup0.m, "polar_tasks_submitted_total")).toBe(1);
    expect(value(sup1.m, "polar_session_results_total", { status: "COMPLETED" })).toBe(3);
    expect(value(sup1.m, "polar_tasks_finished_total", { status: "completed" })).toBe(1);
    expect(value(gw1.m, "polar_gateway_sessions_finished_total", { status: "COMPLETED" })).toBe(3);
    // 3 sessions x 2 turns, every one captured and timed.
    expect(value(gw1.m, "polar_proxy_captured_calls_total", { api_type: "openai_chat" })).toBe(6);
    expect(value(gw1.m, "polar_proxy_upstream_request_duration_seconds_count", { outcome: "ok" })).toBe(6);
    expect(value(gw1.m, "polar_proxy_upstream_request_duration_seconds_sum")).toBeGreaterThan(0);
    expect(value(gw1.m, "polar_proxy_upstream_busy_seconds_total")).toBeGreaterThan(0);
    expect(value(gw1.m, "polar_proxy_errors_total", { dialect: "openai_chat", status: "401" })).toBe(1);
    expect(value(gw1.m, "polar_gateway_stage_depth", { stage: "run" })).toBe(0);
    expect(value(gw1.m, "polar_proxy_upstream_inflight")).toBe(0);
    expect(value(gw1.m, "polar_policy_version")).toBe(0);

    // Weight sync moves the policy version on both sides.
    for (const [op, body] of [["pause", {}], ["resume", { policy_version: 3 }]] as const) {
      const r = await fetch(`${api}/rollout/inference/${op}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      expect(r.status).toBe(200);
    }
    expect(value((await scrape(api)).m, "polar_policy_version")).toBe(3);
    expect(value((await scrape(proxy)).m, "polar_policy_version")).toBe(3);
  }, 90_000);
});
