/**
 * A gone node's lease is kept when its dispatch was already acked. A gateway
 * acks a dispatch only once the session's result is durably in POLAR_RESULTS,
 * so that result is on its way to the supervisor, which checks it against the
 * lease. A CI run of the cluster test showed what releasing such a lease did:
 * the node monitor released it while the supervisor was still behind, the
 * supervisor then refused the result as unleased, and with the delivery
 * already acked nothing ran the session again (the task stayed `running`).
 * Real nats-server; the leases and the dispatch message are real entries.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ackStreamSeq, expireLeases } from "../src/actors/supervisor/node-monitor.ts";
import { openInfra, type Infra } from "../src/nats/infra.ts";
import { decode, encode } from "../src/protocol/codec.ts";
import { SessionLease } from "../src/protocol/schemas.ts";
import { leaseKey, STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import { silentLogger } from "../src/util/log.ts";
import { startTestSystem, TEST_INFRA, type TestSystem } from "./helpers/system.ts";

describe("ackStreamSeq", () => {
  it("reads the stream sequence from both ack subject forms, and nothing from anything else", () => {
    expect(ackStreamSeq("$JS.ACK.POLAR_SESSIONS.dispatch-p.1.42.7.1700000000000000000.3")).toBe(42);
    expect(ackStreamSeq("$JS.ACK._.ACCHASH.POLAR_SESSIONS.dispatch-p.2.43.8.1700000000000000000.0.r4nd0m")).toBe(43);
    for (const s of ["", "$JS.ACK.a.b", "$JS.API.X.Y.1.42.7.1.0", "$JS.ACK.S.C.1.x.7.1.0", "$JS.ACK.S.C.1.0.7.1.0"]) expect(ackStreamSeq(s)).toBeUndefined();
  });
});

describe("a gone node's leases", () => {
  let sys: TestSystem;
  let infra: Infra;
  beforeAll(async () => {
    sys = await startTestSystem();
    infra = await openInfra(sys.client, TEST_INFRA);
  });
  afterAll(async () => {
    await sys?.stop();
  });

  const lease = (session: string, ackSubject: string, node = "gw-gone"): SessionLease => ({
    session_id: session,
    task_id: "gone",
    attempt: 1,
    node_id: node,
    init_at: new Date().toISOString(),
    deadline_at: new Date(Date.now() + 60_000).toISOString(),
    token_sha256: "a".repeat(64),
    updated_at: new Date().toISOString(),
    ack_subject: ackSubject,
  });

  it("keeps the lease of a session whose dispatch was acked, releases (and naks) the one still queued", async () => {
    // A dispatch still in the work queue (nobody consumes pool "gone-pool" here).
    const queued = await infra.js.publish(SUBJECTS.dispatch("gone-pool"), encode({ queued: true }));
    const ack = (seq: number) => `$JS.ACK.${STREAMS.sessions}.dispatch-gone-pool.1.${seq}.1.1700000000000000000.0`;
    const naks: string[] = [];
    const sub = sys.client.subscribe("$JS.ACK.>", { callback: (_e, m) => void naks.push(`${m.subject} ${new TextDecoder().decode(m.data)}`) });
    const leases = {
      acked: lease("ses-0123456789ab-0", ack(queued.seq + 1000)), // gone from the queue: its result is published
      queued: lease("ses-0123456789ab-1", ack(queued.seq)),
      other: lease("ses-0123456789ab-2", ack(queued.seq), "gw-alive"),
    };
    for (const l of Object.values(leases)) await infra.leases.put(leaseKey(l.session_id), encode(l));
    await sys.client.flush();

    const released = await expireLeases({ nc: sys.client, infra, log: silentLogger() }, "gw-gone");
    await sys.client.flush();
    sub.unsubscribe();

    expect(released).toEqual([leases.queued.session_id]);
    const held = async (l: SessionLease) => {
      const e = await infra.leases.get(leaseKey(l.session_id));
      return e?.operation === "PUT" ? SessionLease.parse(decode(e.value)) : undefined;
    };
    expect(await held(leases.acked)).toEqual(leases.acked);
    expect(await held(leases.queued)).toBeUndefined();
    expect(await held(leases.other)).toEqual(leases.other);
    expect(naks).toEqual([`${ack(queued.seq)} -NAK`]);
  });
});
