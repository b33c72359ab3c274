/**
 * The Stage mailbox: workers, a bounded FIFO queue, its real depth, what
 * happens when full (wait or refuse), cancellation while queued, hand-off
 * between stages and the pull gate over several stages.
 */
import { describe, expect, it } from "vitest";
import { Stage } from "../src/actors/gateway/stage.ts";
import { PolarError } from "../src/protocol/errors.ts";

const tick = () => new Promise((r) => setImmediate(r));

describe("Stage", () => {
  it("works `workers` at once, queues up to `queue` more in arrival order, and reports the real depth", async () => {
    const s = new Stage({ name: "RUNNING", workers: 2, queue: 2, whenFull: "wait" });
    const order: string[] = [];
    const a = await s.enter();
    const b = await s.enter();
    expect([s.inflight, s.depth, s.hasRoom]).toEqual([2, 0, true]);
    const c = s.enter().then((r) => (order.push("c"), r));
    const d = s.enter().then((r) => (order.push("d"), r));
    await tick();
    expect([s.inflight, s.depth, s.hasRoom]).toEqual([2, 2, false]);
    a();
    a(); // a second release of the same place is ignored
    const rc = await c;
    expect(order).toEqual(["c"]);
    expect([s.inflight, s.depth]).toEqual([2, 1]);
    b();
    const rd = await d;
    expect(order).toEqual(["c", "d"]);
    rc();
    rd();
    expect([s.inflight, s.depth, s.hasRoom]).toEqual([0, 0, true]);
  });

  it("when full and set to refuse, refuses with a typed unavailable error naming the stage", async () => {
    const s = new Stage({ name: "INIT", workers: 1, queue: 0, whenFull: "refuse" });
    const r = await s.enter();
    const err = await s.enter().catch((e) => e);
    expect(err).toBeInstanceOf(PolarError);
    expect(err).toMatchObject({ code: "unavailable", message: "stage INIT is full (1)" });
    r();
    (await s.enter())();
  });

  it("when full and set to wait, the caller waits outside the queue (counted as blocked) and new callers see no room", async () => {
    const s = new Stage({ name: "POSTRUN", workers: 1, queue: 1, whenFull: "wait" });
    const w = await s.enter();
    const q = s.enter();
    let admitted = false;
    const blocked = s.enter(undefined, () => (admitted = true));
    await tick();
    expect([s.inflight, s.depth, s.blocked, s.hasRoom, admitted]).toEqual([1, 1, 1, false, false]);
    w(); // q gets the worker; the blocked caller gets q's place in the queue
    const rq = await q;
    await tick();
    expect(admitted).toBe(true);
    expect([s.inflight, s.depth, s.blocked]).toEqual([1, 1, 0]);
    rq();
    (await blocked)();
    expect([s.inflight, s.depth]).toEqual([0, 0]);
  });

  it("a caller cancelled while queued leaves the queue and gets the signal's reason", async () => {
    const s = new Stage({ name: "RUNNING", workers: 1, queue: 2, whenFull: "wait" });
    const r = await s.enter();
    const ac = new AbortController();
    const cancelled = s.enter(ac.signal);
    const next = s.enter();
    await tick();
    expect(s.depth).toBe(2);
    ac.abort(new PolarError("cancelled", "session cancelled"));
    await expect(cancelled).rejects.toMatchObject({ code: "cancelled" });
    expect(s.depth).toBe(1);
    r();
    (await next)();
    expect([s.inflight, s.depth]).toEqual([0, 0]);
  });

  it("hands off: the previous stage is let go only once the next one admits", async () => {
    const init = new Stage({ name: "INIT", workers: 1, queue: 0, whenFull: "wait" });
    const run = new Stage({ name: "RUNNING", workers: 1, queue: 0, whenFull: "wait" });
    const running = await run.enter();
    const i = await init.enter();
    const moving = run.enter(undefined, i);
    await tick();
    expect([init.inflight, run.inflight, run.blocked]).toEqual([1, 1, 1]); // still holds INIT
    running();
    (await moving)();
    expect([init.inflight, run.inflight]).toEqual([0, 0]);
  });

  it("the pull gate waits until every stage has room and stops waiting when its signal aborts", async () => {
    const init = new Stage({ name: "INIT", workers: 1, queue: 0, whenFull: "wait" });
    const post = new Stage({ name: "POSTRUN", workers: 1, queue: 0, whenFull: "wait" });
    const p = await post.enter();
    const ac = new AbortController();
    let open = false;
    const gate = Stage.room([init, post], ac.signal).then(() => (open = true));
    await tick();
    expect(open).toBe(false);
    p();
    await gate;
    expect(open).toBe(true);
    const held = await init.enter();
    const ac2 = new AbortController();
    const gate2 = Stage.room([init, post], ac2.signal);
    ac2.abort(new Error("stopping"));
    await expect(gate2).rejects.toThrow("stopping");
    held();
  });

  it("refuses a stage without a worker", () => {
    expect(() => new Stage({ name: "X", workers: 0, queue: 1, whenFull: "wait" })).toThrow(/workers must be >= 1/);
  });
});
