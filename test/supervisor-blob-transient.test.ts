/**
 * A transient object-store failure is not a malformed result: a session
 * result too large for one message (stored as a blob) whose first read fails
 * with a nats.js TimeoutError is redelivered and recorded, while a result
 * whose blob is gone for good is dropped at once (it can never become valid).
 * Real nats-server with a small payload limit, the real supervisor store and
 * results consumer; the one fault is injected around the real object store.
 * (Results here carry no lease: lease authentication has its own tests.)
 */
import type { ObjectStore } from "@nats-io/obj";
import { TimeoutError } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consumeResults } from "../src/actors/supervisor/results.ts";
import { TaskStore } from "../src/actors/supervisor/task-store.ts";
import { openInfra, type Infra } from "../src/nats/infra.ts";
import { publishDurable, request } from "../src/nats/messages.ts";
import { encode, makeHeaders } from "../src/protocol/codec.ts";
import { emptyTiming, TERMINAL_STATUSES, type SessionResult } from "../src/protocol/schemas.ts";
import { CONTENT_TYPES, HEADERS, RESULTS_CONSUMER, STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import { silentLogger } from "../src/util/log.ts";
import { waitFor } from "./helpers/gateway.ts";
import { startTestSystem, TEST_INFRA, type TestSystem } from "./helpers/system.ts";

const PAYLOAD = 128 * 1024;

describe("results stored as blobs", () => {
  let sys: TestSystem;
  let infra: Infra;
  const abort = new AbortController();
  let consuming: Promise<void> | undefined;
  let blobReads = 0;
  let failNext = 0;

  beforeAll(async () => {
    sys = await startTestSystem({}, { maxPayload: PAYLOAD });
    // A real supervisor creates the tasks, then leaves the results to the consumer below.
    await sys.startSupervisor();
    for (const id of ["blob-flaky", "blob-gone"]) {
      await request(sys.client, SUBJECTS.api.submit, { task_id: id, instruction: "x", pool: "nobody-blob", timeout_seconds: 60, runtime: { backend: "local" }, agent: { harness: "shell", custom_shell: { command: "true" } } });
    }
    await sys.stopSupervisors();
    infra = await openInfra(sys.client, TEST_INFRA);
    const real = infra.blobs;
    const flaky = new Proxy(real, {
      get(target, prop) {
        if (prop === "getBlob") {
          return async (name: string) => {
            blobReads++;
            if (failNext > 0) {
              failNext--;
              throw new TimeoutError();
            }
            return target.getBlob(name);
          };
        }
        const v = Reflect.get(target, prop, target);
        return typeof v === "function" ? v.bind(target) : v;
      },
    }) as ObjectStore;
    const store = new TaskStore(infra.tasks, { flags: infra.taskFlags });
    consuming = consumeResults({ infra: { ...infra, blobs: flaky }, store, log: silentLogger(), onTaskDone: () => {}, emit: () => {}, retryBaseMs: 50, requireLease: false }, abort.signal);
  });
  afterAll(async () => {
    abort.abort();
    await consuming?.catch(() => {});
    await sys?.stop();
  });

  /** The task's only session, read from the store (no supervisor answers the API now). */
  const entryOf = async (taskId: string) => {
    const store = new TaskStore(infra.tasks);
    const h = await store.get(taskId);
    if (h) for await (const s of store.sessions(h)) return s;
    return undefined;
  };
  const bigResult = (taskId: string, sessionId: string): SessionResult => ({
    session_id: sessionId,
    task_id: taskId,
    status: "COMPLETED",
    trajectory: { status: "COMPLETED", metadata: { padding: "p".repeat(PAYLOAD * 2) }, traces: [], error: null },
    timing: emptyTiming(),
    node_id: "gw-blob",
    error: null,
    metadata: {},
    attempt: 1,
  });

  it("a result whose blob read times out once is redelivered and recorded", async () => {
    const flakySession = (await entryOf("blob-flaky"))!.session_id;
    failNext = 1;
    const ack = await publishDurable(infra, SUBJECTS.result("blob-flaky"), bigResult("blob-flaky", flakySession), `${flakySession}:1`);
    const msg = await infra.jsm.streams.getMessage(STREAMS.results, { seq: ack.seq });
    expect(msg?.header?.get(HEADERS.blobRef)).toBe("1"); // it did go through the object store
    const s = await waitFor("the flaky result recorded", async () => {
      const e = await entryOf("blob-flaky");
      return e?.status === "COMPLETED" && e;
    }, 20_000);
    expect(s).toMatchObject({ session_id: flakySession, status: "COMPLETED", attempt: 1, node_id: "gw-blob" });
    expect(failNext).toBe(0);
    expect(blobReads).toBeGreaterThanOrEqual(2); // the failed read, then the one that worked
  });

  it("a result whose blob is gone is dropped at once, not retried", async () => {
    const goneSession = (await entryOf("blob-gone"))!.session_id;
    const before = blobReads;
    // A reference to a blob that is not in the object store (as after its retention ran out).
    await infra.js.publish(SUBJECTS.result("blob-gone"), encode({ blob: `gone/${goneSession}`, size: PAYLOAD * 2 }), {
      headers: makeHeaders(CONTENT_TYPES.msgpack, { [HEADERS.blobRef]: "1", [HEADERS.msgId]: `${goneSession}:1` }),
    });
    await waitFor("the result consumer to be idle", async () => {
      const ci = await infra.jsm.consumers.info(STREAMS.results, RESULTS_CONSUMER);
      return ci.num_pending === 0 && ci.num_ack_pending === 0 && blobReads > before;
    }, 20_000);
    expect(blobReads - before).toBe(1); // read once, found missing, dropped
    expect(TERMINAL_STATUSES.has((await entryOf("blob-gone"))!.status)).toBe(false);
  });
});
