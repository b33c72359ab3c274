/**
 * A real harness CLI through the whole system in the Docker runtime: the
 * tools cache mounted read-only, network `none` (only loopback, where the
 * forwarder to the proxy's Unix socket listens). Codex runs the playbook,
 * the workspace changes, the session completes with every call captured as
 * Responses API calls carrying the sim's ids, and the container had no
 * network interface besides loopback.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerUnavailable, TEST_IMAGE } from "./helpers/docker.ts";
import { request } from "../src/nats/messages.ts";
import type { SessionResult } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { installTools } from "../src/tools/install.ts";
import { toolsDir } from "../src/tools/paths.ts";
import { expectEveryCallInTrajectory, expectRecordsFromSim, readSessionFile, traceOf, waitTask, writePlaybook } from "./harness-e2e-helpers.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const IMAGE = TEST_IMAGE;

const missing = await dockerUnavailable("harness-e2e-docker");

describe.skipIf(missing !== undefined)("a harness in the Docker runtime", () => {
  let sys: TestSystem;
  let root: string;
  let workRoot: string;

  beforeAll(async () => {
    await installTools({ names: ["codex"] });
    root = await mkdtemp(join(tmpdir(), "polar-e2e-docker-"));
    workRoot = join(root, "work");
    sys = await startTestSystem({ playbookPath: await writePlaybook(root), maxModelLen: 131_072 });
    await sys.startSupervisor();
    await sys.startGateway({ nodeId: "gw-harness-docker", toolsDir: toolsDir(), workRoot, keepSessionDirs: true, limits: { maxRunWorkers: 2 } });
  }, 600_000);

  afterAll(async () => {
    await sys?.stop();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("codex: runs the playbook in a container with no network but the proxy, completes, every call captured", async () => {
    const tag = "tag_docker_codex";
    await request(sys.client, SUBJECTS.api.submit, {
      task_id: "e2e-docker-codex",
      instruction: `E2E-TASK ${tag}: follow the steps you are given.`,
      timeout_seconds: 240,
      runtime: {
        backend: "docker",
        image: IMAGE,
        network: "none",
        // The session directory is bound into the container: the test reads the workspace from the host.
        workdir: "/polar/session/workspace",
        prepare: [{ type: "exec", command: "mkdir -p .netcheck && cat /proc/net/dev > .netcheck/interfaces" }],
      },
      agent: { harness: "codex", model_name: "Qwen/Qwen3-8B" },
      builder: { strategy: "prefix_merging" },
      evaluator: { strategy: "session_completed" },
    });
    const st = await waitTask(sys, "e2e-docker-codex", 240_000);
    const r: SessionResult = st.results[0];
    expect(r.status, `${r.error}\n${JSON.stringify(r.agent_result?.metadata)}`).toBe("COMPLETED");
    expect(await readSessionFile(workRoot, r, "e2e/first.txt")).toBe(`${tag}\n`);
    expect(await readSessionFile(workRoot, r, "e2e/second.txt")).toBe(`${tag.toUpperCase()}\n`);

    const records = r.completion_session!.completions;
    expect(records.length).toBeGreaterThanOrEqual(3);
    expect(records.every((x) => x.api_type === "openai_responses")).toBe(true);
    expectRecordsFromSim(sys, r);
    expectEveryCallInTrajectory(r);
    const main = traceOf(r, records[0].completion_id);
    expect(records.map((x) => traceOf(r, x.completion_id))).toEqual(records.map(() => main));

    // /proc/net/dev inside the container: a header of two lines, then loopback only.
    const ifaces = (await readSessionFile(workRoot, r, ".netcheck/interfaces")).trim().split("\n").slice(2);
    expect(ifaces.map((l) => l.trim().split(":")[0])).toEqual(["lo"]);
  }, 300_000);
});
