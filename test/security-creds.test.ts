/**
 * `.creds` files (user JWT + NKey seed) against a real nats-server in
 * operator mode (an operator, a JetStream account and a system account,
 * preloaded in a MEMORY resolver; JWTs signed here with NKeys, no `nsc`).
 * A supervisor and a trainer connect with their `.creds`, a gateway runs as
 * a `polar gateway --creds` process, and a task runs end to end. Wrong
 * `.creds` are refused with a clear error: a user of an account the server
 * does not trust, a seed that does not match its JWT, a gateway process
 * started with a wrong file, and a file that is not there.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSupervisor, type SupervisorHandle } from "../src/actors/supervisor/index.ts";
import { createRegistries, specChecker } from "../src/app/registries.ts";
import { connectNats } from "../src/nats/infra.ts";
import { startNatsServer, type NatsServerHandle } from "../src/nats/launcher.ts";
import { request } from "../src/nats/messages.ts";
import type { TaskStatus } from "../src/protocol/schemas.ts";
import { SUBJECTS } from "../src/protocol/subjects.ts";
import { startSim, type SimHandle } from "../src/sim/server.ts";
import { silentLogger } from "../src/util/log.ts";
import { spawnPolar, type PolarProcess } from "./helpers/cli-process.ts";
import { TEST_INFRA } from "./helpers/system.ts";
import { createAccount, createOperator, createUserCreds, credsFile, operatorServerConfig, signJwt } from "./helpers/nats-jwt.ts";
import { nkeys } from "@nats-io/transport-node";

const CLIENT = fileURLToPath(new URL("../config/examples/chat-client.mjs", import.meta.url));

let dir: string;
let nats: NatsServerHandle;
let sim: SimHandle;
let sup: SupervisorHandle;
let supNc: NatsConnection;
let trainer: NatsConnection;
let gateway: PolarProcess | undefined;
const files: Record<string, string> = {};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "polar-sec-creds-"));
  const op = createOperator();
  const account = createAccount(op);
  const stranger = createAccount(createOperator("other-op"), "STRANGER");
  const write = async (name: string, text: string) => {
    files[name] = join(dir, `${name}.creds`);
    await writeFile(files[name], text, { mode: 0o600 });
  };
  for (const who of ["supervisor", "gateway", "trainer"]) await write(who, createUserCreds(account, who));
  await write("stranger", createUserCreds(stranger, "stranger"));
  // A JWT of a real user of the account, with the seed of another key: the nonce signature does not match.
  const real = nkeys.createUser();
  const jwt = signJwt(account.key, real.getPublicKey(), "mismatched", { type: "user", subs: -1, data: -1, payload: -1, pub: {}, sub: {} });
  await write("mismatched", credsFile(jwt, new TextDecoder().decode(nkeys.createUser().getSeed())));
  nats = await startNatsServer({ extraConfig: operatorServerConfig(op, [account]) });
  sim = await startSim({ log: silentLogger() });
  supNc = await connectNats(nats.url, "creds-supervisor", { creds_file: files.supervisor });
  sup = await startSupervisor({ nc: supNc, log: silentLogger(), check: specChecker(createRegistries()) }, { infra: TEST_INFRA, sweepIntervalMs: 1000 });
  trainer = await connectNats(nats.url, "creds-trainer", { creds_file: files.trainer });
}, 60_000);

afterAll(async () => {
  gateway?.signal("SIGKILL", true);
  await gateway?.exited;
  await trainer?.close().catch(() => {});
  await sup?.stop();
  await supNc?.close().catch(() => {});
  await sim?.stop();
  await nats?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe(".creds files in operator mode", () => {
  it("refuses a connection without credentials, a user of an untrusted account, a seed that does not match its JWT, and a missing file", async () => {
    await expect(connectNats(nats.url, "anon", undefined)).rejects.toThrow(/Authorization Violation/i);
    await expect(connectNats(nats.url, "stranger", { creds_file: files.stranger })).rejects.toThrow(/Authorization Violation/i);
    await expect(connectNats(nats.url, "mismatched", { creds_file: files.mismatched })).rejects.toThrow(/Authorization Violation/i);
    await expect(connectNats(nats.url, "missing", { creds_file: join(dir, "nope.creds") })).rejects.toThrow(`cannot read the NATS creds file ${join(dir, "nope.creds")}`);
  });

  it("a gateway process started with a wrong .creds exits with the server's refusal", { timeout: 60_000 }, async () => {
    const bad = spawnPolar(["gateway", "--nats", nats.url, "--creds", files.stranger, "--upstream", sim.url, "--proxy-port", "0"]);
    const code = await bad.exited;
    expect(code).not.toBe(0);
    expect(bad.output()).toMatch(/Authorization Violation/i);
  });

  it("a supervisor, a trainer and a `polar gateway --creds` process run a task end to end", { timeout: 120_000 }, async () => {
    gateway = spawnPolar(["gateway", "--nats", nats.url, "--creds", files.gateway, "--upstream", sim.url, "--proxy-port", "0", "--node-id", "gw-creds"], { POLAR_LOG_LEVEL: "warn" });
    await gateway.waitFor(/gateway gw-creds: proxy/, 60_000);
    const reply = await request<{ total_sessions: number }>(trainer, SUBJECTS.api.submit, {
      task_id: "creds-run", instruction: "say hello", num_samples: 2, timeout_seconds: 60,
      runtime: { backend: "local", kwargs: { isolation: "none" } },
      agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(CLIENT)}`, env: { TURNS: "1" } } },
    });
    expect(reply.total_sessions).toBe(2);
    const deadline = Date.now() + 90_000;
    let st: TaskStatus;
    for (;;) {
      st = await request<TaskStatus>(trainer, SUBJECTS.api.get, { task_id: "creds-run", with_results: true });
      if (["completed", "failed"].includes(st.status)) break;
      if (Date.now() > deadline) throw new Error(`task not done: ${JSON.stringify(st).slice(0, 400)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(st.status, JSON.stringify(st.results.map((r) => r.error))).toBe("completed");
    expect(st.results.map((r) => r.node_id)).toEqual(["gw-creds", "gw-creds"]);
    expect(st.results.every((r) => r.trajectory.traces.length >= 1)).toBe(true);
  });
});
