/**
 * Dashboard responsiveness in a real browser (Debian's chromium), measured
 * side by side in one run: the overview with 100 tasks x 8 sessions against
 * 10 x 8, and the trace viewer with a 50,000-token trace against a
 * 5,000-token one (median of several loads each; the page's own assets, the
 * API answered with synthetic data of those sizes).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { chromium } from "playwright-core";
import { serveAsset } from "../src/dashboard/static.ts";
import { decodeTrace } from "../src/dashboard/decode-trace.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";
import { listen, closeServer } from "../src/util/http.ts";
import { CHROMIUM } from "../test/helpers/browser.ts";

const RUNS = 5;
const STATUSES = ["COMPLETED", "COMPLETED", "COMPLETED", "ERROR", "RUNNING", "READY", "TIMEOUT", "COMPLETED"];

function tasks(n: number) {
  return Array.from({ length: n }, (_, i) => {
    const counts: Record<string, number> = {};
    for (const s of STATUSES) counts[s] = (counts[s] ?? 0) + 1;
    return {
      task_id: `task-${i}`, status: i % 3 ? "completed" : "running", total_sessions: 8, completed_sessions: 6, counts,
      rewards: [0, 0.25, 0.5, 1, 1, 0.75], created_at: new Date(Date.now() - i * 1000).toISOString(), updated_at: null,
    };
  });
}

function session(tokens: number) {
  const tok = qwen3Tokenizer();
  const base = tok.encode("The agent reads the file, runs the tests and edits the function until every test passes. ");
  const ids = Array.from({ length: tokens }, (_, i) => base[i % base.length]);
  const split = Math.floor(tokens / 4);
  const trace = decodeTrace(tok, {
    prompt_ids: ids.slice(0, split), response_ids: ids.slice(split), loss_mask: ids.slice(split).map((_, i) => (i % 7 ? 1 : 0)),
    prompt_messages: [], response_messages: [], tools: null, finish_reason: "stop",
    response_logprobs: ids.slice(split).map((_, i) => -((i * 7919) % 600) / 100), reward: 1, reward_components: {},
    metadata: { chain_index: 0, chain_segment: 0, chain_start_reason: "first" },
  }, 0);
  return { task_id: "t", session_id: "s", status: "COMPLETED", attempt: 1, node_id: "gw", error: null, reward: 1, builder: "prefix_merging", timing: {}, traces: [trace] };
}

function server(data: { tasks: unknown; trace: unknown }) {
  const json = (res: ServerResponse, body: unknown) => {
    const s = JSON.stringify(body);
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(s) });
    res.end(s);
  };
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/events") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      return void res.write(": bench\n\n");
    }
    if (path === "/rollout/status") return json(res, { pending_sessions: 0, running_tasks: 0, nodes: [] });
    if (path === "/dashboard/api/tasks") return json(res, { tasks: data.tasks });
    if (path.startsWith("/dashboard/api/trace/")) return json(res, data.trace);
    void serveAsset(path, res).then((ok) => ok || (res.writeHead(404), res.end()));
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function run(): Promise<void> {
  if (!CHROMIUM) {
    process.stdout.write("chromium not installed (apt-get install chromium): skipped\n");
    return;
  }
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
  const results: Record<string, number> = {};
  try {
    for (const [label, nTasks, nTokens] of [["small", 10, 5_000], ["large", 100, 50_000]] as const) {
      const srv = server({ tasks: tasks(nTasks), trace: session(nTokens) });
      const port = await listen(srv, 0, "127.0.0.1");
      const url = `http://127.0.0.1:${port}`;
      const over: number[] = [];
      const trace: number[] = [];
      const first: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
        let t = performance.now();
        await page.goto(`${url}/`);
        await page.waitForFunction((n) => (globalThis as any).document.querySelectorAll("tr[data-task]").length === n, nTasks);
        over.push(performance.now() - t);
        t = performance.now();
        await page.goto(`${url}/#/trace/t/s`);
        await page.waitForSelector(".tokens .t");
        first.push(performance.now() - t);
        await page.waitForFunction((n) => (globalThis as any).document.querySelectorAll(".tokens .t").length === n, nTokens, { timeout: 60_000 });
        trace.push(performance.now() - t);
        await page.close();
      }
      await closeServer(srv);
      results[`${label}_overview`] = median(over);
      results[`${label}_trace`] = median(trace);
      results[`${label}_first`] = median(first);
      process.stdout.write(
        `${label}: overview with ${nTasks} tasks x 8 sessions rendered in ${median(over).toFixed(0)} ms (median of ${RUNS}); ` +
          `trace of ${nTokens.toLocaleString("en")} tokens: first tokens shown in ${median(first).toFixed(0)} ms, all rendered in ${median(trace).toFixed(0)} ms\n`,
      );
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(
    `ratios large/small: overview ${(results.large_overview / results.small_overview).toFixed(2)}x for 10x the tasks; ` +
      `trace fully rendered ${(results.large_trace / results.small_trace).toFixed(2)}x and first tokens ${(results.large_first / results.small_first).toFixed(2)}x for 10x the tokens\n`,
  );
}
