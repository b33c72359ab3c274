/**
 * Session leases on a real nats-server: once the supervisor has recorded a
 * session's result its lease is marked finished, and no attempt takes it
 * again — a delivery redelivered after the result (its ack lost in an
 * outage) is dropped instead of running the agent a second time — while the
 * holder's renewal fails, as for a lease taken by another attempt.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { acquireLease, leaseFor, newLeaseToken, renewLease } from "../src/actors/gateway/lease.ts";
import { FINISHED_LEASE_KEEP_MS, markLeaseFinished } from "../src/actors/supervisor/finished-leases.ts";
import { startNatsServer, type NatsServerHandle } from "../src/nats/launcher.ts";
import { connectNats, openInfra, type Infra } from "../src/nats/infra.ts";
import { decode } from "../src/protocol/codec.ts";
import { SessionLease } from "../src/protocol/schemas.ts";
import { leaseKey } from "../src/protocol/subjects.ts";
import { TEST_INFRA } from "./helpers/system.ts";

describe("finished leases", () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let infra: Infra;
  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connectNats(server.url, "lease-test");
    infra = await openInfra(nc, TEST_INFRA);
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  const request = (sessionId: string, attempt: number, nodeId: string, sha256: string, now = new Date()) => ({
    sessionId, taskId: "t-lease", attempt, nodeId, budgetSeconds: 60, tokenSha256: sha256, now, calmSince: 0,
  });
  const read = async (sid: string) => SessionLease.parse(decode((await infra.leases.get(leaseKey(sid)))!.value));

  it("a finished session's lease is never taken again, by a newer attempt or a stale one; the holder's renewal is lost", async () => {
    const sid = "ses-aaaaaaaaaaaa-0";
    const t1 = newLeaseToken();
    const got = await acquireLease(infra.leases, request(sid, 1, "gw-a", t1.sha256), 3000, () => false);
    expect(got.kind).toBe("held");
    if (got.kind !== "held") return;
    const now = new Date();
    await markLeaseFinished(infra.leases, sid, "t-lease", 1, now);
    const marked = await read(sid);
    expect(marked).toMatchObject({ attempt: 1, node_id: "gw-a", token_sha256: t1.sha256, finished_at: now.toISOString() });
    // Kept at least FINISHED_LEASE_KEEP_MS (the sweep removes it after deadline_at plus grace).
    expect(Date.parse(marked.deadline_at)).toBe(now.getTime() + FINISHED_LEASE_KEEP_MS);
    // A redelivered attempt 2 on another gateway, long after the holder's last renewal: dropped, not run.
    const late = new Date(now.getTime() + 60_000);
    const again = await acquireLease(infra.leases, request(sid, 2, "gw-b", newLeaseToken().sha256, late), 3000, () => true);
    expect(again).toMatchObject({ kind: "finished", by: { attempt: 1, finished_at: now.toISOString() } });
    // The holder's own renewal: lost (it must not go on), exactly as when another attempt took it.
    expect(await renewLease(infra.leases, got.lease, got.revision, late)).toMatchObject({ kind: "lost", by: { finished_at: now.toISOString() } });
    // Marking twice changes nothing.
    const rev = (await infra.leases.get(leaseKey(sid)))!.revision;
    await markLeaseFinished(infra.leases, sid, "t-lease", 1, late);
    expect((await infra.leases.get(leaseKey(sid)))!.revision).toBe(rev);
  });

  it("a session no gateway leased (a result the supervisor recorded itself) gets a marker too", async () => {
    const sid = "ses-bbbbbbbbbbbb-3";
    await markLeaseFinished(infra.leases, sid, "t-lease", 0);
    expect(await read(sid)).toMatchObject({ session_id: sid, task_id: "t-lease", attempt: 0, node_id: "supervisor", finished_at: expect.any(String) });
    const got = await acquireLease(infra.leases, request(sid, 1, "gw-a", newLeaseToken().sha256), 3000, () => false);
    expect(got.kind).toBe("finished");
    // A lease a gateway deleted (handed back) is replaced by the marker as well.
    const sid2 = "ses-cccccccccccc-1";
    const t = newLeaseToken();
    const held = await acquireLease(infra.leases, request(sid2, 1, "gw-a", t.sha256), 3000, () => false);
    expect(held.kind).toBe("held");
    await infra.leases.delete(leaseKey(sid2));
    await markLeaseFinished(infra.leases, sid2, "t-lease", 1);
    expect((await read(sid2)).finished_at).toEqual(expect.any(String));
    expect(leaseFor(request(sid2, 1, "gw-a", t.sha256)).finished_at).toBeUndefined();
  });
});
