/**
 * Evaluation on the gateway versus on a separate evaluator process: POSTRUN
 * worker time per session, measured side by side in one run.
 *
 * One nats-server, the sim (config/playbooks/swe.json), a supervisor and two
 * gateways in two pools, both hosting no evaluator actor:
 * - `gw` evaluates in its own POSTRUN worker (remote evaluation off): the
 *   fresh runtime warms up beside the agent, the tests run in POSTRUN;
 * - `ev` sends the evaluation to a `polar evaluator` process (the CLI, a
 *   separate OS process) and holds no POSTRUN worker while it waits.
 * Both get the same task at the same time: config/tasks/swe-durations.json
 * (the python tool agent fixing a Django-style instance in Docker, graded by
 * swebench_harness with refresh_runtime), BENCH_SESSIONS samples each.
 * POSTRUN worker time = postrun_ms - eval_wait_ms (the part of POSTRUN that
 * holds a worker). Needs Docker and the SWE instance images.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Dockerode from "dockerode";
import { startGateway, type GatewayHandle } from "../src/actors/gateway/index.ts";
import { startSupervisor } from "../src/actors/supervisor/index.ts";
import { createRegistries, specChecker } from "../src/app/registries.ts";
import { instanceImageName } from "../src/evaluators/swebench/instance.ts";
import { connectNats, type InfraOptions } from "../src/nats/infra.ts";
import { startNatsServer } from "../src/nats/launcher.ts";
import { request } from "../src/nats/messages.ts";
import type { SessionResult, TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { startSim } from "../src/sim/server.ts";
import { silentLogger } from "../src/util/log.ts";

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 8);
const root = fileURLToPath(new URL("..", import.meta.url));
const INFRA: InfraOptions = { evalAckWaitMs: 30_000 };

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
}
const med = (xs: number[]) => quantile(xs, 0.5);

async function waitDone(nc: Parameters<typeof request>[0], taskId: string): Promise<SessionResult[]> {
  for (;;) {
    const st = await request<TaskStatus>(nc, SUBJECTS.api.get, { task_id: taskId, with_results: true }, { timeoutMs: 30_000 }).catch(() => undefined);
    if (st && ["completed", "failed", "cancelled"].includes(st.status)) return st.results;
    await new Promise((r) => setTimeout(r, 250));
  }
}

export async function run(): Promise<void> {
  const task = JSON.parse(readFileSync(join(root, "config/tasks/swe-durations.json"), "utf8")) as Record<string, any>;
  const image = instanceImageName(task.evaluator.config.instance.instance_id);
  const docker = new Dockerode();
  const why = await docker.getImage(image).inspect().then(() => undefined, (e: Error) => e.message);
  if (why) {
    console.log(`evaluator: skipped (${image}: ${why}; bash scripts/swe-images.sh builds it)`);
    return;
  }
  const log = silentLogger();
  const dir = await mkdtemp(join(tmpdir(), "polar-bench-eval-"));
  const nats = await startNatsServer({});
  const sim = await startSim({ log, playbookPath: join(root, "config/playbooks/swe.json") });
  const conns = await Promise.all(["bench-client", "bench-supervisor", "bench-gw", "bench-ev"].map((n) => connectNats(nats.url, n)));
  const [client, supNc, gwNc, evNc] = conns;
  const registries = createRegistries();
  const sup = await startSupervisor({ nc: supNc!, log, check: specChecker(registries) }, { http: { host: "127.0.0.1", port: 0 }, infra: INFRA });
  const limits = { maxInitWorkers: 4, maxRunWorkers: 4, maxPostrunWorkers: 4 };
  const gateways: GatewayHandle[] = [
    await startGateway({ nc: gwNc!, log, registries }, { nodeId: "bench-gw", pool: "gw", workRoot: join(dir, "gw"), limits, infra: INFRA, evaluator: false, remoteEvaluation: false, proxy: { upstreams: [sim.url] } }),
    await startGateway({ nc: evNc!, log, registries }, { nodeId: "bench-ev", pool: "ev", workRoot: join(dir, "ev"), limits, infra: INFRA, evaluator: false, proxy: { upstreams: [sim.url] } }),
  ];
  const evaluator = spawn(process.execPath, ["bin/polar.js", "evaluator", "--nats", nats.url, "--node-id", "bench-evaluator", "--pool", "ev", "--max-concurrency", "4"], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, POLAR_LOG_LEVEL: "error" },
  });
  const exited = new Promise((r) => evaluator.on("close", r));
  try {
    await new Promise<void>((resolve, reject) => {
      let out = "";
      evaluator.stdout!.on("data", (d) => (out += d) && out.includes("evaluator bench-evaluator:") && resolve());
      void exited.then(() => reject(new Error("polar evaluator exited early")));
    });
    const submit = (id: string, pool: string, n: number) =>
      request<{ task_id: string }>(client!, SUBJECTS.api.submit, { ...task, task_id: id, pool, num_samples: n }).then((r) => r.task_id);
    // Warm-up (images in the page cache, the tool agent's first run), one session each.
    await Promise.all([waitDone(client!, await submit("warm-gw", "gw", 1)), waitDone(client!, await submit("warm-ev", "ev", 1))]);
    const [gwIds, evIds] = [await submit("bench-gw", "gw", SESSIONS), await submit("bench-ev", "ev", SESSIONS)];
    const [gw, ev] = await Promise.all([waitDone(client!, gwIds), waitDone(client!, evIds)]);
    const row = (name: string, rs: SessionResult[]) => {
      const ok = rs.filter((r) => r.status === "COMPLETED" && (r.trajectory.metadata.evaluation as { outcome_reward?: number } | undefined)?.outcome_reward === 1);
      const t = ok.map((r) => r.timing);
      const worker = t.map((x) => x.postrun_ms - x.eval_wait_ms);
      console.log(
        `evaluator ${name}: ${ok.length}/${rs.length} sessions rewarded 1.0; POSTRUN worker time median ${med(worker).toFixed(0)} ms (p90 ${quantile(worker, 0.9).toFixed(0)}); ` +
          `postrun span ${med(t.map((x) => x.postrun_ms)).toFixed(0)} ms, of which waiting for the evaluator ${med(t.map((x) => x.eval_wait_ms)).toFixed(0)} ms; eval ${med(t.map((x) => x.eval_ms)).toFixed(0)} ms; e2e ${med(t.map((x) => x.e2e_ms)).toFixed(0)} ms`,
      );
      return med(worker);
    };
    const a = row("on the gateway (in the POSTRUN worker)", gw);
    const b = row("on a separate evaluator process", ev);
    console.log(`evaluator: POSTRUN worker time per session, gateway / evaluator process = ${(a / Math.max(b, 1e-9)).toFixed(1)}x (${SESSIONS} sessions each, side by side)`);
  } finally {
    evaluator.kill("SIGTERM");
    await exited;
    for (const g of gateways) await g.stop();
    await sup.stop();
    for (const c of conns) await c.close().catch(() => {});
    await sim.stop();
    await nats.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
