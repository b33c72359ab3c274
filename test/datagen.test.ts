/**
 * `polar datagen` as a process on config/swe's instances: the python tool
 * agent under the shell harness, the sim following the swe playbook, Docker
 * images per instance, swebench_harness through the gateway's evaluator.
 * The first run is killed (SIGKILL) after one instance; the second resumes,
 * finishes the rest without redoing it, and writes the report.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Dockerode from "dockerode";
import { PNG } from "pngjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerUnavailable } from "./helpers/docker.ts";
import { sweImagesMissing } from "./helpers/swe.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const docker = new Dockerode();
const missing = (await dockerUnavailable("datagen", docker)) ?? (await sweImagesMissing(docker));
const root = fileURLToPath(new URL("..", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "polar-datagen-"));
const out = join(dir, "out");

function datagen(natsUrl: string) {
  const child = spawn(
    process.execPath,
    ["bin/polar.js", "datagen", join(dir, "instances.jsonl"), "--harness", "shell", "--task-template", "config/swe/datagen-template.json", "--out", out, "--concurrency", "1", "--nats", natsUrl, "--progress-interval", "1"],
    { cwd: root, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, POLAR_LOG_LEVEL: "warn" } },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => child.on("close", r));
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

const state = () => JSON.parse(readFileSync(join(out, "state.json"), "utf8")) as { prefix: string; done: Record<string, { task_id: string; sessions: number; accepted: number }>; submitted: Record<string, string> };
const lines = (f: string) => (existsSync(join(out, f)) ? readFileSync(join(out, f), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)) : []);

describe.skipIf(missing !== undefined)("polar datagen", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    const all = readFileSync(join(root, "config/swe/instances.jsonl"), "utf8").split("\n").filter(Boolean);
    writeFileSync(join(dir, "instances.jsonl"), all.slice(0, 2).join("\n") + "\n");
    sys = await startTestSystem({ playbookPath: "config/playbooks/swe.json" });
    await sys.startSupervisor();
    await sys.startGateway({ nodeId: `gw-datagen-${process.pid}`, limits: { maxRunWorkers: 2 } });
  }, 120_000);
  afterAll(async () => {
    await sys?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("resumes after a kill without redoing finished instances, then writes SFT lines and the acceptance report", async () => {
    const first = datagen(sys.nats.url);
    const deadline = Date.now() + 240_000;
    while (Date.now() < deadline && !(existsSync(join(out, "state.json")) && Object.keys(state().done).length >= 1)) await new Promise((r) => setTimeout(r, 200));
    first.child.kill("SIGKILL");
    await first.exited;
    const before = state();
    expect(Object.keys(before.done)).toHaveLength(1);
    const [doneId] = Object.keys(before.done);
    const linesBefore = [...lines("accepted.jsonl"), ...lines("rejected.jsonl")];
    expect(linesBefore.map((l) => l.instance_id)).toEqual([doneId]);

    const second = datagen(sys.nats.url);
    expect(await second.exited, second.stderr()).toBe(0);
    const after = state();
    expect(Object.keys(after.done).sort()).toHaveLength(2);
    expect(after.done[doneId!]).toEqual(before.done[doneId!]); // not redone
    expect(after.prefix).toBe(before.prefix);
    expect(after.submitted).toEqual({});
    // Non-TTY progress: periodic lines, starting from what the first run finished.
    expect(second.stderr()).toMatch(/datagen: 1\/2 instances · 1 sessions/);
    expect(second.stderr()).toMatch(/datagen: 2\/2 instances · 2 sessions · \d accepted/);
    const all = [...lines("accepted.jsonl"), ...lines("rejected.jsonl")];
    expect(all).toHaveLength(2);
    expect(new Set(all.map((l) => l.session_id)).size).toBe(2);
    for (const l of all) {
      expect(l.task_id.startsWith(`${after.prefix}-`)).toBe(true);
      expect(l.accepted).toBe(l.status === "COMPLETED" && l.reward >= 1);
      expect(l.messages.length).toBeGreaterThan(1);
      expect(l.samples.length).toBeGreaterThan(0);
      for (const s of l.samples) {
        expect(s.loss_mask).toHaveLength(s.input_ids.length);
        expect(s.loss_mask.slice(0, s.prompt_length).every((m: number) => m === 0)).toBe(true);
        expect(s.loss_mask.slice(s.prompt_length)).toContain(1);
      }
    }
    for (const l of lines("accepted.jsonl")) expect(l.reward).toBe(1);
    for (const l of lines("rejected.jsonl")) expect(l.accepted).toBe(false);
    // The report: printed and saved, with a PNG chart.
    const accepted = lines("accepted.jsonl").length;
    const table = readFileSync(join(out, "acceptance.txt"), "utf8");
    expect(second.stdout()).toBe(table);
    expect(table).toMatch(new RegExp(`TOTAL\\s+2\\s+2\\s+${accepted}\\s+${((accepted / 2) * 100).toFixed(1)}%`));
    const rows = JSON.parse(readFileSync(join(out, "acceptance.json"), "utf8")) as Array<{ repo: string; instances: number }>;
    expect(rows.map((r) => r.repo)).toEqual([...new Set(all.map((l) => l.repo))].sort().concat("TOTAL"));
    const png = PNG.sync.read(readFileSync(join(out, "acceptance.png")));
    expect(png.width).toBeGreaterThanOrEqual(360);
    expect(png.height).toBeGreaterThan(200);
  }, 600_000);
});
