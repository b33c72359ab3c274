/**
 * The shared /proc pass that finds marked processes: concurrent callers each
 * get exactly their own marked processes, and a marker nobody carries finds none.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { findMarked } from "../src/runtimes/marked-scan.ts";

describe("findMarked", () => {
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const c of children) c.kill("SIGKILL");
  });

  it("answers concurrent callers from shared passes, each with its own pids", async () => {
    const marks = ["a", "b", "c"].map((x) => `scan-${process.pid}-${x}`);
    for (const [i, m] of marks.entries()) {
      // two processes for the first mark, one for the others
      for (let k = 0; k < (i === 0 ? 2 : 1); k++) children.push(spawn("sleep", ["30"], { env: { ...process.env, POLAR_TEST_MARK: m }, stdio: "ignore" }));
    }
    const found = await Promise.all([...marks, `scan-${process.pid}-none`].map((m) => findMarked("POLAR_TEST_MARK", m)));
    const pids = (from: number, n: number) => children.slice(from, from + n).map((c) => c.pid).sort();
    expect(found.map((f) => [...f].sort())).toEqual([pids(0, 2), pids(2, 1), pids(3, 1), []]);
    // a prefix of a mark is not the mark
    expect(await findMarked("POLAR_TEST_MARK", `scan-${process.pid}-`)).toEqual([]);
  });
});
