/**
 * Shared pieces of the harness end-to-end tests: the playbook the sim follows,
 * the connect-recording shim (strace) put in front of each CLI, and checks of
 * a finished session against what the inference server actually returned.
 */
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect } from "vitest";
import { verifyTrajectory } from "../src/builders/index.ts";
import { request } from "../src/nats/messages.ts";
import type { SessionResult, TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { FORWARDER_PORT } from "../src/runtimes/common.ts";
import type { TestSystem } from "./helpers/system.ts";

/** The sim's playbook: two shell steps that build on each other, then an answer; and a task that hangs. */
export const PLAYBOOK = {
  name: "harness-e2e",
  rules: [
    {
      name: "hang",
      match: "E2E-HANG (?<tag>[a-z0-9_]+)",
      steps: [{ run: "mkdir -p e2e && echo $<tag> > e2e/started.txt" }, { run: "sleep 600" }],
      done: "Finished.",
    },
    {
      name: "two-steps",
      match: "E2E-TASK (?<tag>[a-z0-9_]+)",
      steps: [
        { think: "First the file.", run: "mkdir -p e2e && echo $<tag> > e2e/first.txt" },
        { think: "Now transform it.", run: "tr a-z A-Z < e2e/first.txt > e2e/second.txt && cat e2e/second.txt" },
      ],
      done: "Finished: e2e/second.txt is written.",
    },
  ],
};

export async function writePlaybook(dir: string): Promise<string> {
  const path = join(dir, "playbook.json");
  await writeFile(path, JSON.stringify(PLAYBOOK));
  return path;
}

/**
 * A stand-in for a CLI binary that runs the real one (found on PATH by its
 * own file name) under strace, recording every connect() of the whole
 * process tree next to itself in `connect.log`.
 */
export async function writeConnectShim(dir: string, bin: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, bin);
  await writeFile(
    path,
    // Not exec: the sandbox may have made this process the parent of its own helpers, and
    // strace -f would wait for those too.
    `#!/bin/sh\nd=$(cd "$(dirname "$0")" && pwd)\nstrace -f -qq -e trace=connect -o "$d/connect.log" ${bin} "$@"\nrc=$?\nexit $rc\n`,
  );
  await chmod(path, 0o755);
  return path;
}

export interface Connect {
  family: string;
  addr?: string;
  port?: number;
  path?: string;
}

/** Parses strace connect() lines. */
export function parseConnects(log: string): Connect[] {
  const out: Connect[] = [];
  for (const line of log.split("\n")) {
    if (!line.includes("connect(")) continue;
    const fam = /sa_family=(AF_\w+)/.exec(line)?.[1];
    if (!fam) continue;
    const port = /sin6?_port=htons\((\d+)\)/.exec(line)?.[1];
    const addr = /inet_addr\("([^"]+)"\)/.exec(line)?.[1] ?? /inet_pton\(AF_INET6, "([^"]+)"/.exec(line)?.[1];
    const path = /sun_path=(?:@)?"([^"]*)"/.exec(line)?.[1];
    out.push({ family: fam, addr, port: port ? Number(port) : undefined, path });
  }
  return out;
}

/**
 * Every connect must be a Unix socket or the proxy as the sandbox sees it
 * (the forwarder on loopback in the private network, or the proxy's own
 * loopback port when the network is shared).
 */
export function expectOnlyGateway(connects: Connect[], proxyPort: number): void {
  const outside = connects.filter((c) => {
    if (c.family === "AF_UNIX") return false;
    if (c.family === "AF_INET" || c.family === "AF_INET6") {
      const loop = c.addr === "127.0.0.1" || c.addr === "::1" || c.addr === "::ffff:127.0.0.1";
      return !(loop && (c.port === FORWARDER_PORT || c.port === proxyPort));
    }
    return c.family !== "AF_NETLINK";
  });
  expect(outside, "connections to anything but the gateway").toEqual([]);
  expect(connects.some((c) => c.family.startsWith("AF_INET") && (c.port === FORWARDER_PORT || c.port === proxyPort))).toBe(true);
}

export async function waitTask(sys: TestSystem, taskId: string, timeoutMs: number): Promise<TaskStatus> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const st = await request<TaskStatus>(sys.client, SUBJECTS.api.get, { task_id: taskId, with_results: true }, { timeoutMs: 5000 }).catch(() => undefined);
    if (st && ["completed", "failed", "cancelled"].includes(st.status)) return st;
    if (Date.now() > deadline) throw new Error(`task ${taskId} not done: ${JSON.stringify(st?.sessions.map((s) => s.status))}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Every captured call's prompt ids and sampled ids (with logprobs) are exactly what the sim returned for it. */
export function expectRecordsFromSim(sys: TestSystem, r: SessionResult): void {
  const byPrompt = new Map<string, Record<string, any>>();
  for (const ex of sys.upstream.exchanges) byPrompt.set(JSON.stringify(ex.response.prompt_token_ids), ex.response);
  for (const rec of r.completion_session?.completions ?? []) {
    const resp = rec.response as Record<string, any>;
    const up = byPrompt.get(JSON.stringify(resp.prompt_token_ids));
    expect(up, `record ${rec.completion_id} came from the sim`).toBeDefined();
    expect(resp.prompt_token_ids.length).toBeGreaterThan(10);
    expect(resp.choices[0].token_ids).toEqual(up!.choices[0].token_ids);
    const lp = (c: any) => c.logprobs.content.map((x: { logprob: number }) => x.logprob);
    expect(lp(resp.choices[0])).toEqual(lp(up!.choices[0]));
  }
}

/**
 * The trajectory holds every captured call: each completion is in exactly one
 * trace, and the verifier proves every trainable token against the raw session.
 */
export function expectEveryCallInTrajectory(r: SessionResult): void {
  const session = r.completion_session!;
  const ids = session.completions.map((c) => c.completion_id).sort();
  const inTraces = r.trajectory.traces.flatMap((t) => (t.metadata.completion_ids as string[] | undefined) ?? []).sort();
  expect(inTraces).toEqual(ids);
  const report = verifyTrajectory(r.trajectory, session);
  expect(report.errors).toEqual([]);
  expect(report.ok).toBe(true);
  expect(report.stats.completions_dropped).toBe(0);
  expect(report.stats.sampled_tokens_trainable).toBe(report.stats.sampled_tokens_total);
}

/** The traces each completion id is in (prefix_merging puts a whole chain in one trace). */
export function traceOf(r: SessionResult, completionId: string): number {
  return r.trajectory.traces.findIndex((t) => ((t.metadata.completion_ids as string[] | undefined) ?? []).includes(completionId));
}

export async function readSessionFile(workRoot: string, r: SessionResult, rel: string): Promise<string> {
  return readFile(join(workRoot, `${r.session_id}.a${r.attempt}`, "workspace", rel), "utf8");
}
