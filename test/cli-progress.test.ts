/** The progress display: a redrawn bar on a terminal, throttled plain lines elsewhere, with counts and ETA. */
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { fmtSeconds, Progress } from "../src/cli/progress.ts";

function sink() {
  const chunks: string[] = [];
  const out = new Writable({
    write(c, _e, cb) {
      chunks.push(String(c));
      cb();
    },
  });
  return { out, text: () => chunks.join(""), chunks };
}

describe("Progress", () => {
  it("redraws one line with a bar, counts per status and an ETA on a terminal", () => {
    let now = 1000;
    const s = sink();
    const p = new Progress({ total: 4, out: s.out, tty: true, now: () => now });
    now += 2000;
    p.tick("COMPLETED");
    expect(s.chunks[0]).toBe(`\r\x1b[2K[${"█".repeat(7)}${"░".repeat(21)}] 1/4 sessions · COMPLETED 1 · 2.0s · ETA 6.0s`);
    now += 2000;
    p.tick("ERROR");
    expect(s.chunks[1]).toContain("2/4 sessions · COMPLETED 1 · ERROR 1 · 4.0s · ETA 4.0s");
    p.tick("COMPLETED");
    p.tick("COMPLETED");
    expect(s.chunks[3]).toContain(`[${"█".repeat(28)}] 4/4 sessions · COMPLETED 3 · ERROR 1 · 4.0s`);
    expect(s.chunks[3]).not.toContain("ETA");
    p.finish();
    expect(s.chunks[4]).toBe("\n");
  });

  it("prints plain lines at most every interval off a terminal, and always the last", () => {
    let now = 0;
    const s = sink();
    const p = new Progress({ total: 10, out: s.out, tty: false, intervalMs: 5000, now: () => now });
    for (let i = 0; i < 9; i++) {
      now += 1000;
      p.tick("COMPLETED");
    }
    // Lines at 1 s (first) and 6 s; the rest waited for the interval.
    expect(s.text().split("\n").filter(Boolean)).toEqual([
      "1/10 sessions · COMPLETED 1 · 1.0s · ETA 9.0s",
      "6/10 sessions · COMPLETED 6 · 6.0s · ETA 4.0s",
    ]);
    now += 1000;
    p.tick("TIMEOUT");
    expect(s.text().trim().split("\n").at(-1)).toBe("10/10 sessions · COMPLETED 9 · TIMEOUT 1 · 10.0s");
    p.finish();
    expect(s.text().trim().split("\n")).toHaveLength(3);
    expect(s.text()).not.toContain("\x1b");
  });

  it("formats durations for people", () => {
    expect(fmtSeconds(4.25)).toBe("4.3s");
    expect(fmtSeconds(75)).toBe("1m15s");
    expect(fmtSeconds(3 * 3600 + 120)).toBe("3h02m");
  });
});
