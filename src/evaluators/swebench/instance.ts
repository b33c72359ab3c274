/**
 * A SWE-bench / SWE-Gym task instance in their field names. FAIL_TO_PASS and
 * PASS_TO_PASS are JSON-encoded string lists in SWE-bench's datasets (plain
 * lists are accepted too). Other fields of the datasets are kept as given.
 * polar reads two optional extra fields: `test_cmd` (the test command, else
 * the repository's default) and `log_parser` (pytest, pytest_options,
 * pytest_v2, django or sympy).
 */
import { z } from "zod";
import { LOG_PARSERS } from "./log-parsers.ts";

const MAX_TESTS = 100_000;

const TestList = z.union([z.string(), z.array(z.string())]).transform((v, ctx) => {
  if (Array.isArray(v)) return v;
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch {
    ctx.addIssue({ code: "custom", message: "not a JSON-encoded list of test names" });
    return z.NEVER;
  }
  if (!Array.isArray(parsed) || !parsed.every((t) => typeof t === "string")) {
    ctx.addIssue({ code: "custom", message: "not a JSON-encoded list of test names" });
    return z.NEVER;
  }
  return parsed as string[];
}).pipe(z.array(z.string()).max(MAX_TESTS));

export const SweInstance = z.looseObject({
  instance_id: z.string().min(1).max(256),
  repo: z.string().min(1).max(256),
  base_commit: z.string().regex(/^[0-9a-f]{7,64}$/, "a git commit id (hex)"),
  test_patch: z.string().min(1, "empty test patch"),
  FAIL_TO_PASS: TestList.refine((l) => l.length > 0, "no FAIL_TO_PASS test"),
  PASS_TO_PASS: TestList,
  patch: z.string().optional(),
  problem_statement: z.string().optional(),
  version: z.union([z.string(), z.number()]).optional(),
  environment_setup_commit: z.string().optional(),
  test_cmd: z.string().min(1).optional(),
  log_parser: z.enum(Object.keys(LOG_PARSERS) as [string, ...string[]]).optional(),
});
export type SweInstance = z.infer<typeof SweInstance>;

/** SWE-bench's instance image name: `sweb.eval.x86_64.<id with "__" as "_1776_">:latest`, lower-cased. */
export function instanceImageName(instanceId: string, prefix = ""): string {
  return `${prefix}sweb.eval.x86_64.${instanceId.replaceAll("__", "_1776_").toLowerCase()}:latest`;
}
