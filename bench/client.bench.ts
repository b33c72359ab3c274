/**
 * Trainer client benchmark: the time from the moment a group's last session
 * result is published (its POLAR_RESULTS timestamp) to the moment a trainer
 * holds the full group (every session's traces, status, reward, advantage).
 * Three trainers wait for the same tasks side by side: the client over NATS,
 * the client over the HTTP API (server-sent events), and a poller reading the
 * task status every 500 ms (how `polar submit --wait` used to follow a task).
 * Groups of 8 sessions with one model call each, everything on localhost.
 */
import { fileURLToPath } from "node:url";
import { jetstreamManager } from "@nats-io/jetstream";
import { up } from "../src/app/up.ts";
import { PolarClient } from "../src/client/index.ts";
import { STREAMS } from "../src/protocol/subjects.ts";
import { silentLogger } from "../src/util/log.ts";

const CLIENT = fileURLToPath(new URL("../config/examples/chat-client.mjs", import.meta.url));
const GROUPS = Number(process.env.BENCH_GROUPS ?? 30);
const SAMPLES = 8;

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
}

/** A JetStream timestamp ("…:05.123456789Z") in fractional milliseconds since the epoch. */
function epochMs(iso: string): number {
  const m = /\.(\d+)Z$/.exec(iso);
  const frac = m ? Number(`0.${m[1]}`) * 1000 : 0;
  return Date.parse(iso.replace(/\.\d+Z$/, "Z")) + frac;
}

export async function run(): Promise<void> {
  const sys = await up({ log: silentLogger(), supervisor: { http: { host: "127.0.0.1", port: 0 } } });
  try {
    const nats = await PolarClient.connect({ nats: sys.natsUrl });
    const http = await PolarClient.connect({ api: sys.supervisor.httpUrl! });
    const jsm = await jetstreamManager(sys.connections[0]);
    const task = (id: string) => ({
      task_id: id,
      instruction: "Say hello.",
      num_samples: SAMPLES,
      runtime: { backend: "local", kwargs: { isolation: "none" } },
      agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(CLIENT)}`, env: { TURNS: "1" } } },
      evaluator: { strategy: "session_completed" },
    });
    const lat = { nats: [] as number[], http: [] as number[], poll: [] as number[], supervisor: [] as number[], client: [] as number[] };
    for (let i = -2; i < GROUPS; i++) {
      const id = `bench-client-${i < 0 ? `warm${-i}` : i}`;
      const h = await nats.submit(task(id));
      const hh = await http.task(id);
      const done = { nats: 0, http: 0, poll: 0 };
      const poll = (async () => {
        for (;;) {
          const st = await h.status();
          if (st.status === "completed") return void (done.poll = Date.now());
          await new Promise((r) => setTimeout(r, 500));
        }
      })();
      const [gn, gh] = await Promise.all([
        h.group().then((g) => ((done.nats = Date.now()), g)),
        hh.group().then((g) => ((done.http = Date.now()), g)),
        poll,
      ]);
      if (gn.sessions.length !== SAMPLES || gh.sessions.some((s) => s.traces.length !== 1)) throw new Error(`group ${id} incomplete`);
      // The last result of the group, as published (the stream's own timestamp).
      const st = await h.status();
      let last = 0;
      for (const s of st.sessions) {
        const m = await jsm.streams.getMessage(STREAMS.results, { seq: s.result_seq! });
        last = Math.max(last, epochMs(m!.timestamp));
      }
      // The supervisor's share: until its last trace of the group is on POLAR_TRACES.
      let lastTrace = 0;
      for (const s of gn.sessions) for (const m of s.traces) {
        const sm = await jsm.streams.getMessage(STREAMS.traces, { seq: m.seq });
        lastTrace = Math.max(lastTrace, epochMs(sm!.timestamp));
      }
      if (i < 0) continue;
      lat.supervisor.push(lastTrace - last);
      lat.client.push(done.nats - lastTrace);
      lat.nats.push(done.nats - last);
      lat.http.push(done.http - last);
      lat.poll.push(done.poll - last);
    }
    const fmt = (xs: number[]) => `p50 ${quantile(xs, 0.5).toFixed(1)} ms, p99 ${quantile(xs, 0.99).toFixed(1)} ms`;
    console.log(`last result published -> trainer has the full group (${GROUPS} groups of ${SAMPLES}, localhost):`);
    console.log(`  client over NATS:            ${fmt(lat.nats)}`);
    console.log(`    of which the supervisor records the results and publishes the traces: ${fmt(lat.supervisor)}`);
    console.log(`    and the client (last trace published -> group() resolved):             ${fmt(lat.client)}`);
    console.log(`  client over HTTP (SSE):      ${fmt(lat.http)}`);
    console.log(`  status polling every 500 ms: ${fmt(lat.poll)}  (p50 ratio vs NATS client ${(quantile(lat.poll, 0.5) / Math.max(0.1, quantile(lat.nats, 0.5))).toFixed(1)}x)`);
    await nats.close();
    await http.close();
  } finally {
    await sys.stop();
  }
}
