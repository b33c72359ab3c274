/**
 * System benchmark: the whole pipeline on one machine (embedded nats-server,
 * supervisor, one gateway, the sim) running tasks of many short sessions.
 * Each session is a shell harness making one model call through the proxy
 * in a local runtime (plain processes, then bubblewrap), so the figures are
 * the framework's own overhead per session: dispatch, runtime start, proxy
 * capture, build, evaluation, result and trace publication.
 * Prints sessions/s and the median/p99 of per-session stage timings.
 */
import { fileURLToPath } from "node:url";
import { up } from "../src/app/up.ts";
import { request } from "../src/nats/messages.ts";
import type { TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { silentLogger } from "../src/util/log.ts";

const CLIENT = fileURLToPath(new URL("../config/examples/chat-client.mjs", import.meta.url));
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 96);

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
}

async function runOnce(isolation: "none" | "auto"): Promise<void> {
  const sys = await up({
    log: silentLogger(),
    supervisor: {},
    gateway: { limits: { maxInitWorkers: 16, maxRunWorkers: 16, maxPostrunWorkers: 8, readyCapacity: 16 } },
  });
  try {
    const [nc] = sys.connections;
    const task = (id: string, n: number) => ({
      task_id: id,
      instruction: "Say hello.",
      num_samples: n,
      runtime: { backend: "local", kwargs: { isolation } },
      agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(CLIENT)}`, env: { TURNS: "1" } } },
      evaluator: { strategy: "session_completed" },
    });
    await waitDone(nc, (await request<{ task_id: string }>(nc, SUBJECTS.api.submit, task(`warm-${isolation}`, 8))).task_id);
    const t0 = performance.now();
    const id = (await request<{ task_id: string }>(nc, SUBJECTS.api.submit, task(`bench-${isolation}`, SESSIONS))).task_id;
    const st = await waitDone(nc, id);
    const secs = (performance.now() - t0) / 1000;
    const ok = st.sessions.filter((s) => s.status === "COMPLETED").length;
    const t = st.results.map((r) => r.timing);
    const fmt = (name: string, xs: number[]) => `${name} median ${quantile(xs, 0.5).toFixed(1)} ms p99 ${quantile(xs, 0.99).toFixed(1)} ms`;
    console.log(
      `local runtime isolation=${isolation}: ${SESSIONS} sessions (${ok} completed) in ${secs.toFixed(2)} s = ${(SESSIONS / secs).toFixed(1)} sessions/s at 16 running workers`,
    );
    console.log(`  ${fmt("e2e", t.map((x) => x.e2e_ms))}; ${fmt("init", t.map((x) => x.init_ms))}; ${fmt("run", t.map((x) => x.run_ms))}; ${fmt("postrun", t.map((x) => x.postrun_ms))}`);
    console.log(`  postrun parts: ${fmt("build", t.map((x) => x.build_ms))}; ${fmt("eval", t.map((x) => x.eval_ms))}; ${fmt("runtime stop", t.map((x) => x.runtime_stop_ms))}; ${fmt("queue before postrun", t.map((x) => x.postrun_queue_ms))}`);
  } finally {
    await sys.stop();
  }
}

async function waitDone(nc: Parameters<typeof request>[0], taskId: string): Promise<TaskStatus> {
  for (;;) {
    const st = await request<TaskStatus>(nc, SUBJECTS.api.get, { task_id: taskId }, { timeoutMs: 60_000 });
    if (st.status === "completed" || st.status === "failed") return st;
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function run(): Promise<void> {
  await runOnce("none");
  await runOnce("auto");
}
