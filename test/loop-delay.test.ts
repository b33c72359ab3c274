import { afterEach, describe, expect, it } from "vitest";
import { LoopDelayMonitor } from "../src/util/loop-delay.ts";
import { waitFor } from "./helpers/gateway.ts";

describe("LoopDelayMonitor", () => {
  let m: LoopDelayMonitor | undefined;
  afterEach(() => m?.stop());

  it("reports a blocked event loop in the window it happened, zeros before the first window", async () => {
    m = new LoopDelayMonitor(300);
    expect(m.last).toEqual({ p99_ms: 0, max_ms: 0 });
    await new Promise((r) => setTimeout(r, 50)); // the histogram's first tick only starts its clock
    const until = performance.now() + 250;
    while (performance.now() < until); // block the loop for 250 ms
    await waitFor("a window with the block", () => m!.last.max_ms >= 200, 5000);
    expect(m.last.max_ms).toBeGreaterThanOrEqual(200);
    expect(m.last.p99_ms).toBeGreaterThan(0);
    expect(m.last.p99_ms).toBeLessThanOrEqual(m.last.max_ms);
  });
});
