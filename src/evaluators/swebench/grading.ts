/**
 * Grading with SWE-bench's semantics (swebench/harness/grading.py):
 * - a test passes only as PASSED or XFAIL; a PASS_TO_PASS test is also
 *   maintained when SKIPPED; a test missing from the log counts as failed;
 * - FULL when every FAIL_TO_PASS and PASS_TO_PASS test succeeds, PARTIAL when
 *   some but not all FAIL_TO_PASS do and every PASS_TO_PASS does, else NO;
 * - a log without both markers (the runner never started or never finished)
 *   or with a failure marker yields no status map at all.
 */
import type { StatusMap } from "./log-parsers.ts";
import { END_TEST_OUTPUT, START_TEST_OUTPUT } from "./specs.ts";

export const APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed";
export const RESET_FAILED = ">>>>> Reset Failed";
export const TESTS_ERROR = ">>>>> Tests Errored";
export const TESTS_TIMEOUT = ">>>>> Tests Timed Out";

export type Resolution = "FULL" | "PARTIAL" | "NO";

export interface TestsStatus {
  FAIL_TO_PASS: { success: string[]; failure: string[] };
  PASS_TO_PASS: { success: string[]; failure: string[] };
}

const passed = (t: string, sm: StatusMap) => sm.get(t) === "PASSED" || sm.get(t) === "XFAIL";
const maintained = (t: string, sm: StatusMap) => passed(t, sm) || sm.get(t) === "SKIPPED";

/** Why a log yields no results, or null when the tests ran between both markers. */
export function logProblem(log: string): string | null {
  for (const code of [APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR, TESTS_TIMEOUT]) if (log.includes(code)) return code;
  if (!log.includes(START_TEST_OUTPUT)) return "the test runner never started (no start marker)";
  if (!log.includes(END_TEST_OUTPUT)) return "the test run did not finish (no end marker)";
  return null;
}

/** The text between the markers (the whole log when the markers' text is empty of results is SWE-bench's fallback, left to the caller). */
export function testOutput(log: string): string {
  return log.split(START_TEST_OUTPUT)[1]!.split(END_TEST_OUTPUT)[0]!;
}

export function testsReport(sm: StatusMap, failToPass: string[], passToPass: string[]): TestsStatus {
  const r: TestsStatus = { FAIL_TO_PASS: { success: [], failure: [] }, PASS_TO_PASS: { success: [], failure: [] } };
  for (const t of failToPass) (passed(t, sm) ? r.FAIL_TO_PASS.success : r.FAIL_TO_PASS.failure).push(t);
  for (const t of passToPass) (maintained(t, sm) ? r.PASS_TO_PASS.success : r.PASS_TO_PASS.failure).push(t);
  return r;
}

function ratio(s: { success: string[]; failure: string[] }): number {
  const total = s.success.length + s.failure.length;
  return total === 0 ? 1 : s.success.length / total;
}

export function resolution(r: TestsStatus): Resolution {
  const f2p = ratio(r.FAIL_TO_PASS);
  const p2p = ratio(r.PASS_TO_PASS);
  if (f2p === 1 && p2p === 1) return "FULL";
  if (f2p > 0 && f2p < 1 && p2p === 1) return "PARTIAL";
  return "NO";
}
