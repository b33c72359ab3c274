// A trainer in TypeScript/JavaScript: submit a task, watch results land, take the GRPO group.
// Run from a project that depends on polar (or from this repository): node examples/client/train.mjs
import { readFile } from "node:fs/promises";
import { PolarClient } from "polar";

const client = await PolarClient.connect({ nats: process.env.POLAR_NATS_URL ?? "nats://127.0.0.1:4222" });
const task = JSON.parse(await readFile("config/tasks/demo-shell.json", "utf8"));
const handle = await client.submit({ ...task, task_id: `demo-ts-${Date.now()}` });
for await (const r of handle.results()) console.log("result", r.session_id, r.status, `${r.trajectory.traces.length} traces`);
const group = await handle.group();
for (const s of group.sessions) {
  console.log(`sample ${s.sample_index}: ${s.status} reward ${s.reward} advantage ${s.advantage.toFixed(3)} traces ${s.traces.length}`);
}
// Replay: any trace stream can be read again later, or resumed after the last sequence you processed.
const all = [];
for await (const m of handle.traces()) all.push(m);
const rest = [];
for await (const m of handle.traces({ fromSeq: all[0].seq + 1 })) rest.push(m);
console.log(`${all.length} traces; resumed after the first: ${rest.length}`);
await client.close();
