/**
 * Finished work is never thrown away, over the real system (nats-server,
 * supervisor, gateways with the local runtime, the sim):
 * - results finished during a 30 s NATS outage (two gateways) are published
 *   when NATS is back (retried with backoff), not re-run as a new attempt,
 *   and each lands once;
 * - a gateway asked to stop finishes POSTRUN of sessions whose agent already
 *   finished and publishes them instead of handing them back;
 * - a session redelivered to the gateway that still runs its older attempt
 *   (late keep-alive) does not run twice and does not mix their captures.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer, type NatsServerHandle } from "../src/nats/launcher.ts";
import { request } from "../src/nats/messages.ts";
import { openInfra } from "../src/nats/infra.ts";
import { STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import { ONE_CALL, shellTask, waitFor, waitTaskDone } from "./helpers/gateway.ts";
import { startTestSystem, TEST_INFRA, type TestSystem } from "./helpers/system.ts";

describe("no lost work", () => {
  let sys: TestSystem;
  let restarted: NatsServerHandle | undefined;
  beforeAll(async () => {
    sys = await startTestSystem();
    await sys.startSupervisor();
  });
  afterAll(async () => {
    await sys?.stopGateways();
    await sys?.stopSupervisors();
    await restarted?.stop();
    await sys?.stop();
  });

  it("a session redelivered to the gateway still running its older attempt runs once; its capture stays attempt 1", async () => {
    // keep-alive far beyond ack_wait (2.5 s): the running session is redelivered to this same gateway.
    const gw = await sys.startGateway({ nodeId: "gw-late", limits: { keepAliveMs: 60_000 } });
    const calls = sys.upstream.exchanges.length;
    await request(sys.client, SUBJECTS.api.submit, shellTask("redelivered-here", `${ONE_CALL} && sleep 4 && ${ONE_CALL}`));
    const st = await waitTaskDone(sys, "redelivered-here");
    const r = st.results[0];
    expect([r.status, r.attempt, r.node_id]).toEqual(["COMPLETED", 1, "gw-late"]);
    expect(r.completion_session?.completions.map((c) => c.attempt)).toEqual([1, 1]);
    expect(sys.upstream.exchanges.length - calls).toBe(2); // one run, not two
    expect(r.lease_token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    await sys.stopGateways();
    expect(gw.pipeline.size).toBe(0);
  });

  it("a gateway asked to stop publishes the sessions whose agent finished instead of requeueing them", async () => {
    const gw = await sys.startGateway({ nodeId: "gw-stopping", limits: { maxRunWorkers: 2, maxPostrunWorkers: 2 } });
    await request(
      sys.client,
      SUBJECTS.api.submit,
      shellTask("stop-in-postrun", ONE_CALL, { num_samples: 2, evaluator: { strategy: "command", config: { command: "sleep 2" } } }),
    );
    await waitFor("both sessions in POSTRUN", () => gw.metrics().postrun_inflight === 2, 20_000, 20);
    await sys.stopGateways();
    await sys.startGateway({ nodeId: "gw-after" });
    const st = await waitTaskDone(sys, "stop-in-postrun");
    expect(st.results.map((r) => [r.status, r.attempt, r.node_id])).toEqual([
      ["COMPLETED", 1, "gw-stopping"],
      ["COMPLETED", 1, "gw-stopping"],
    ]);
    await sys.stopGateways();
  });

  it("results finished during a 30 s NATS outage are published when it is back: no session runs as attempt 2, every result lands once", async () => {
    await sys.stopGateways();
    const limits = { maxInitWorkers: 2, maxRunWorkers: 2, readyCapacity: 0 };
    const gws = [await sys.startGateway({ nodeId: "gw-outage-a", limits }), await sys.startGateway({ nodeId: "gw-outage-b", limits })];
    const running = () => gws.reduce((n, g) => n + g.metrics().run_inflight, 0);
    const calls = sys.upstream.exchanges.length;
    await request(sys.client, SUBJECTS.api.submit, shellTask("outage", `${ONE_CALL} && sleep 1.5`, { num_samples: 4 }));
    await waitFor("4 sessions running after their model call", () => running() === 4 && sys.upstream.exchanges.length - calls === 4, 60_000, 20);
    const { port, storeDir } = sys.nats;
    const outageStart = Date.now();
    sys.nats.kill("SIGKILL");
    await sys.nats.closed;
    await waitFor("every agent finished during the outage", () => running() === 0, 30_000, 50);
    // The outage lasts 30 s in all: far past ack_wait (2.5 s), so every held delivery is redelivered when NATS is back.
    await waitFor("30 s of outage", () => Date.now() - outageStart >= 30_000, 40_000, 200);
    restarted = await startNatsServer({ port, storeDir });
    const st = await waitTaskDone(sys, "outage", 90_000);
    expect(st.status).toBe("completed");
    expect(st.results).toHaveLength(4);
    expect(st.results.map((r) => [r.status, r.attempt])).toEqual(st.results.map(() => ["COMPLETED", 1]));
    expect(new Set(st.results.map((r) => r.node_id))).toEqual(new Set(["gw-outage-a", "gw-outage-b"]));
    expect(sys.upstream.exchanges.length - calls).toBe(4); // nothing ran again
    // Every result landed once on POLAR_RESULTS (publish retries are deduplicated by session and attempt).
    const infra = await openInfra(sys.client, TEST_INFRA);
    const subject = SUBJECTS.result("outage");
    expect((await infra.jsm.streams.info(STREAMS.results, { subjects_filter: subject })).state.subjects?.[subject]).toBe(4);
  }, 180_000);
});
