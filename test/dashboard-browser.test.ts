/**
 * The dashboard in a real browser (Debian's chromium through playwright-core)
 * against the real stack: nats-server, supervisor, gateway, sim. A task
 * submitted while the page is open appears and completes without a reload,
 * node stage bars move, a trace shows exactly its tokens with mask colours
 * matching `loss_mask`, and a cancelled task shows as cancelled. Screenshots
 * of each view go to `.polar/screenshots/`.
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionResult, TaskStatus } from "../src/protocol/schemas.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";
import { launchBrowser } from "./helpers/browser.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLIENT = join(ROOT, "config/examples/chat-client.mjs");
const SHOTS = join(ROOT, ".polar", "screenshots");

function task(task_id: string, num_samples: number, env: Record<string, string>) {
  return {
    task_id,
    instruction: `Task ${task_id}: say hello.`,
    num_samples,
    timeout_seconds: 120,
    runtime: { backend: "local" },
    agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(CLIENT)}`, env } },
    builder: { strategy: "prefix_merging" },
    evaluator: { strategy: "session_completed" },
  };
}

describe("dashboard in a real browser", () => {
  let sys: TestSystem;
  let api: string;
  let browser: Browser;
  let page: Page;
  let navigations = 0;

  const post = async (path: string, body: unknown) => {
    const r = await fetch(`${api}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    expect(r.status).toBe(200);
    return r.json();
  };

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    sys = await startTestSystem();
    const sup = await sys.startSupervisor();
    api = sup.httpUrl!;
    await sys.startGateway({ limits: { maxRunWorkers: 2, maxInitWorkers: 2 } });
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    page.on("pageerror", (e) => console.error("page error:", e.message));
    page.on("console", (m) => m.type() === "error" && console.error("console:", m.text()));
    page.on("framenavigated", (f) => {
      if (f === page.mainFrame()) navigations++;
    });
    await page.goto(api);
    await page.waitForSelector(".node[data-node]");
    // Record the highest value each stage bar shows while the page is open.
    // Runs in the page (DOM globals are typed loosely: the test program has no DOM lib).
    await page.evaluate(() => {
      const g = globalThis as any;
      const w = g as { __maxStage: Record<string, number> };
      w.__maxStage = {};
      const seen = () => {
        for (const el of g.document.querySelectorAll(".stage[data-stage]")) {
          const k = el.dataset.stage!;
          w.__maxStage[k] = Math.max(w.__maxStage[k] ?? 0, Number(el.dataset.value));
        }
      };
      new g.MutationObserver(seen).observe(g.document.body, { subtree: true, childList: true, attributes: true });
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await sys?.stop();
  });

  it("shows a task submitted while the page is open, live until it completes, with moving stage bars", async () => {
    const before = navigations;
    await post("/rollout/task/submit", task("dash-live", 4, { TURNS: "2", DELAY_MS: "3000" }));
    await page.waitForSelector('tr[data-task="dash-live"]', { timeout: 15_000 });
    await page.waitForSelector('tr[data-task="dash-live"][data-status="completed"]', { timeout: 60_000 });
    expect(navigations).toBe(before); // no reload
    // The gateway's own evaluator actor is listed with the evaluators.
    expect(await page.textContent(".node[data-evaluator]")).toMatch(/in gateway gw-/);
    expect(await page.textContent('tr[data-task="dash-live"] [data-field="done"]')).toBe("4/4");
    const max = await page.evaluate(() => (globalThis as any).__maxStage as Record<string, number>);
    // Some stage bar showed the sessions passing through (INIT, READY, RUNNING or POSTRUN).
    expect(Math.max(0, ...Object.values(max))).toBeGreaterThan(0);
    await page.screenshot({ path: join(SHOTS, "overview.png"), fullPage: true });
  }, 90_000);

  it("opens a session's traces with exactly the trace's tokens, coloured by loss mask", async () => {
    await page.click('tr[data-task="dash-live"] a');
    await page.waitForSelector("tr.click[data-session]");
    await page.screenshot({ path: join(SHOTS, "task.png"), fullPage: true });
    const sessionId = await page.getAttribute("tr.click[data-session]", "data-session");
    await page.click(`tr[data-session="${sessionId}"]`);
    await page.waitForSelector("section.trace, #view > .err");
    expect(await page.locator("#view > .err").count(), (await page.textContent("#view")) ?? "").toBe(0);
    await page.waitForSelector('#view[data-rendered="all"]'); // long traces are appended in idle slices

    const st = (await (await fetch(`${api}/rollout/task/dash-live?results=true`)).json()) as TaskStatus;
    const result = st.results.find((r: SessionResult) => r.session_id === sessionId)!;
    const tok = qwen3Tokenizer();
    const traces = result.trajectory.traces;
    expect(traces.length).toBeGreaterThan(0);
    expect(await page.locator("section.trace").count()).toBe(traces.length);
    for (const [i, t] of traces.entries()) {
      const card = page.locator(`section.trace[data-trace="${i}"]`);
      const shown = await card.evaluate((el: any) => ({
        prompt: Array.from(el.querySelectorAll(".t.p"), (s: any) => s.textContent as string),
        masks: Array.from(el.querySelectorAll(".t.r"), (s: any) => (s.classList.contains("m1") ? 1 : 0)),
        response: Array.from(el.querySelectorAll(".t.r"), (s: any) => s.textContent as string),
      }));
      expect(shown.prompt).toEqual(t.prompt_ids.map((id) => tok.tokenText(id)));
      expect(shown.response).toEqual(t.response_ids.map((id) => tok.tokenText(id)));
      expect(shown.masks).toEqual(t.loss_mask);
      expect(t.loss_mask).toContain(1);
    }
    // Hovering a sampled token shows its id and logprob.
    const t0 = traces[0];
    const j = t0.loss_mask.indexOf(1);
    await page.hover(`section.trace[data-trace="0"] .t[data-i="${t0.prompt_ids.length + j}"]`);
    const tip = await page.textContent("#tip");
    expect(tip).toContain(`id ${t0.response_ids[j]}`);
    expect(tip).toContain(`logprob ${t0.response_logprobs![j].toFixed(4)}`);
    await page.screenshot({ path: join(SHOTS, "trace.png"), fullPage: false });
  }, 60_000);

  it("shows a cancelled task as cancelled, live", async () => {
    await post("/rollout/task/submit", task("dash-cancel", 2, { TURNS: "3", DELAY_MS: "15000" }));
    await page.goto(`${api}/#/task/dash-cancel`);
    await page.waitForSelector("#cancel");
    await page.click("#cancel");
    await page.waitForSelector('[data-field="task-status"]:text-is("cancelled")', { timeout: 30_000 });
    const statuses = await page.$$eval("tr[data-session]", (rows) => rows.map((r) => r.getAttribute("data-status")));
    expect(statuses.every((s) => s === "CANCELLED" || s === "ERROR")).toBe(true);
    await page.screenshot({ path: join(SHOTS, "cancelled.png"), fullPage: true });
    await page.goto(api);
    await page.waitForSelector('tr[data-task="dash-cancel"][data-status="cancelled"]');
  }, 60_000);
});
