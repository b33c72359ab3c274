// SWE-bench grading semantics, log parsers on real-format runner output, patch
// filtering and instance validation (fast, no Docker).
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { logProblem, resolution, testOutput, testsReport } from "../src/evaluators/swebench/grading.ts";
import { SweInstance, instanceImageName } from "../src/evaluators/swebench/instance.ts";
import { parseDjango, parsePytest, parsePytestOptions, parsePytestV2, parseSympy } from "../src/evaluators/swebench/log-parsers.ts";
import { applyScript, extractScript, filterPatch, globRegExp } from "../src/evaluators/swebench/patch.ts";
import { END_TEST_OUTPUT, START_TEST_OUTPUT, repoSpec, splitModifiedNew, testDirectives } from "../src/evaluators/swebench/specs.ts";
import { createEvaluatorRegistry } from "../src/evaluators/registry.ts";

const PYTEST_LOG = `============================= test session starts ==============================
collected 7 items

tests/test_slug.py ..F.sxE                                               [100%]

==================================== ERRORS ====================================
_______________________ ERROR at setup of test_fixture ________________________
E       fixture 'db' not found
=========================== short test summary info ============================
PASSED tests/test_slug.py::test_lowercase
PASSED tests/test_slug.py::test_strips_edges
PASSED tests/test_slug.py::test_params[a-b]
FAILED tests/test_slug.py::test_collapses_runs - AssertionError: assert 'hello---world' == 'hello-world'
SKIPPED [1] tests/test_slug.py:30: needs network
XFAIL tests/test_slug.py::test_known_bug - reason: upstream issue
ERROR tests/test_slug.py::test_fixture - fixture 'db' not found
============== 1 failed, 3 passed, 1 skipped, 1 xfailed, 1 error in 0.05s ===============
`;

// Django's runner at --verbosity 2 (older and newer unittest naming), output printed inside a test, failure headers.
const DJANGO_LOG = `Testing against Django installed in '/testbed/django' with up to 1 processes
Creating test database for alias 'default'...
System check identified no issues (0 silenced).
test_ask_for_confirmation (auth_tests.test_management.ChangepasswordManagementCommandTestCase) ... ok
test_nonascii_output (auth_tests.test_management.ChangepasswordManagementCommandTestCase) ... ERROR
test_unsupported (auth_tests.test_management.CreatesuperuserTests) ... skipped "Database doesn't support feature(s): can_defer"
test_exactly_one_hour (format_tests.tests.FormatDurationTests.test_exactly_one_hour) ... FAIL
test_prints (auth_tests.test_basic.BasicTestCase) ... some text the test printed
ok
test_hours (format_tests.tests.FormatDurationTests.test_hours) ... ok

======================================================================
ERROR: test_nonascii_output (auth_tests.test_management.ChangepasswordManagementCommandTestCase)
----------------------------------------------------------------------
Traceback (most recent call last):
UnicodeEncodeError: 'ascii' codec can't encode character
----------------------------------------------------------------------
Ran 6 tests in 0.120s

FAILED (failures=1, errors=1, skipped=1)
`;

const SYMPY_LOG = `============================= test process starts ==============================
executable:         /usr/bin/python3  (3.11.2-final-0) [CPython]
architecture:       64-bit
cache:              no
ground types:       python 
random seed:        41241385
hash randomization: on (PYTHONHASHSEED=3296184290)

sympy/core/tests/test_numbers.py[4] 
test_seterr ok
test_mod F
test_divmod E
test_igcd ok                                                              [FAIL]


________________________________________________________________________________
_______________ sympy/core/tests/test_numbers.py:test_mod ________________
Traceback (most recent call last):
  File "/testbed/sympy/core/tests/test_numbers.py", line 55, in test_mod
    assert Rational(1, 2) % Rational(1, 3) == Rational(1, 6)
AssertionError
============= tests finished: 2 passed, 1 failed, 1 exceptions, in 0.31 seconds ==============
DO *NOT* COMMIT!
`;

describe("log parsers", () => {
  it("pytest -rA: every status line, failures without their message, skip summaries ignored", () => {
    const m = parsePytest(PYTEST_LOG);
    expect(Object.fromEntries(m)).toEqual({
      "tests/test_slug.py::test_lowercase": "PASSED",
      "tests/test_slug.py::test_strips_edges": "PASSED",
      "tests/test_slug.py::test_params[a-b]": "PASSED",
      "tests/test_slug.py::test_collapses_runs": "FAILED",
      "tests/test_slug.py::test_known_bug": "XFAIL",
      "tests/test_slug.py::test_fixture": "ERROR",
      // SWE-bench's name-first pattern also matches the "____ ERROR at setup of …" header; kept as it does.
      _______________________: "ERROR",
    });
  });

  it("pytest -v style (name first) and coloured output", () => {
    expect(Object.fromEntries(parsePytest("tests/a.py::t1 PASSED  [ 50%]\ntests/a.py::t2 FAILED [100%]\n"))).toEqual({ "tests/a.py::t1": "PASSED", "tests/a.py::t2": "FAILED" });
    const coloured = "\x1b[32mPASSED\x1b[0m tests/a.py::t1\n\x1b[31mFAILED\x1b[0m tests/a.py::t2 - boom\n";
    expect(Object.fromEntries(parsePytestV2(coloured))).toEqual({ "tests/a.py::t1": "PASSED", "tests/a.py::t2": "FAILED" });
  });

  it("pytest options: an absolute-path parameter is shortened to its file name", () => {
    const m = parsePytestOptions("PASSED tests/test_io.py::test_read[/tmp/pytest-7/data/file.dcm]\nPASSED tests/test_io.py::test_x[//net]\n");
    expect([...m.keys()]).toEqual(["tests/test_io.py::test_read[/file.dcm]", "tests/test_io.py::test_x[//net]"]);
  });

  it("Django: ok / ERROR / skipped / FAIL, a verdict on the next line, ERROR: headers", () => {
    const m = parseDjango(DJANGO_LOG);
    expect(m.get("test_ask_for_confirmation (auth_tests.test_management.ChangepasswordManagementCommandTestCase)")).toBe("PASSED");
    expect(m.get("test_nonascii_output (auth_tests.test_management.ChangepasswordManagementCommandTestCase)")).toBe("ERROR");
    expect(m.get("test_unsupported (auth_tests.test_management.CreatesuperuserTests)")).toBe("SKIPPED");
    expect(m.get("test_exactly_one_hour (format_tests.tests.FormatDurationTests.test_exactly_one_hour)")).toBe("FAILED");
    expect(m.get("test_prints (auth_tests.test_basic.BasicTestCase)")).toBe("PASSED");
    expect(m.get("test_hours (format_tests.tests.FormatDurationTests.test_hours)")).toBe("PASSED");
    // SWE-bench's parser also records the bare method name of an "ERROR:" header.
    expect(m.get("test_nonascii_output")).toBe("ERROR");
  });

  it("SymPy: ok / F / E lines and failure headers; the last test of a file (followed by [OK]/[FAIL]) is not parsed", () => {
    const m = parseSympy(SYMPY_LOG);
    expect(Object.fromEntries(m)).toEqual({
      "sympy/core/tests/test_numbers.py:test_mod": "FAILED",
      test_seterr: "PASSED",
      test_mod: "FAILED",
      test_divmod: "ERROR",
    });
  });
});

describe("grading", () => {
  const sm = parsePytest(PYTEST_LOG);
  const P = "tests/test_slug.py::";
  it("FULL, PARTIAL and NO as SWE-bench resolves them", () => {
    expect(resolution(testsReport(sm, [P + "test_lowercase", P + "test_known_bug"], [P + "test_strips_edges"]))).toBe("FULL");
    expect(resolution(testsReport(sm, [P + "test_lowercase", P + "test_collapses_runs"], [P + "test_strips_edges"]))).toBe("PARTIAL");
    expect(resolution(testsReport(sm, [P + "test_collapses_runs"], [P + "test_strips_edges"]))).toBe("NO");
    // Every FAIL_TO_PASS passes but a PASS_TO_PASS broke.
    expect(resolution(testsReport(sm, [P + "test_lowercase"], [P + "test_fixture"]))).toBe("NO");
  });

  it("a test missing from the log fails; SKIPPED maintains a PASS_TO_PASS but does not pass a FAIL_TO_PASS", () => {
    const skipped = new Map([["a", "SKIPPED" as const]]);
    const r = testsReport(sm, [P + "test_absent"], [P + "test_absent_too"]);
    expect(r).toEqual({ FAIL_TO_PASS: { success: [], failure: [P + "test_absent"] }, PASS_TO_PASS: { success: [], failure: [P + "test_absent_too"] } });
    expect(testsReport(skipped, ["a"], ["a"])).toEqual({ FAIL_TO_PASS: { success: [], failure: ["a"] }, PASS_TO_PASS: { success: ["a"], failure: [] } });
    // No PASS_TO_PASS at all counts as maintained.
    expect(resolution(testsReport(sm, [P + "test_lowercase"], []))).toBe("FULL");
  });

  it("a runner that never started or never finished yields no results", () => {
    expect(logProblem("pytest: command not found\n")).toMatch(/never started/);
    expect(logProblem(`${START_TEST_OUTPUT}\nPASSED a\n`)).toMatch(/did not finish/);
    expect(logProblem(`${START_TEST_OUTPUT}\n>>>>> Tests Timed Out\n${END_TEST_OUTPUT}`)).toBe(">>>>> Tests Timed Out");
    const log = `noise\nPASSED outside\n${START_TEST_OUTPUT}\nPASSED inside\n${END_TEST_OUTPUT}\n`;
    expect(logProblem(log)).toBeNull();
    expect([...parsePytest(testOutput(log)).keys()]).toEqual(["inside"]);
  });
});

describe("patches and instances", () => {
  const diff = (p: string, body = "@@ -1 +1 @@\n-a\n+b\n") => `diff --git a/${p} b/${p}\nindex 1..2 100644\n--- a/${p}\n+++ b/${p}\n${body}`;
  it("filters debris and exclude patterns out of a patch, keeping the other files byte for byte", () => {
    const patch = diff("pkg/mod.py") + diff("pkg/__pycache__/mod.cpython-311.pyc") + diff("x.pyc") + diff(".pytest_cache/v/cache/nodeids") + diff("notes/todo.md") + diff("pkg/other.py");
    const { patch: out, excluded } = filterPatch(patch, ["**/__pycache__/**", "**/*.pyc", "**/.pytest_cache/**", "notes/**"]);
    expect(out).toBe(diff("pkg/mod.py") + diff("pkg/other.py"));
    expect(excluded).toEqual(["pkg/__pycache__/mod.cpython-311.pyc", "x.pyc", ".pytest_cache/v/cache/nodeids", "notes/todo.md"]);
    expect(globRegExp("*.log").test("a/b/c.log")).toBe(true);
    expect(globRegExp("src/*.py").test("src/a/b.py")).toBe(false);
  });

  it("extract and apply scripts: the default diff is taken against the base commit; apply falls back like SWE-bench", () => {
    expect(extractScript("/testbed", "git diff --binary --submodule=diff", "abc123")).toContain("git diff --binary --submodule=diff abc123");
    expect(extractScript("/testbed", "git diff HEAD", "abc123")).toMatch(/&& git diff HEAD$/);
    const s = applyScript("/testbed", "/tmp/p.diff");
    expect(s.indexOf("git apply --verbose '/tmp/p.diff'")).toBeLessThan(s.indexOf("git apply --verbose --reject"));
    expect(s.indexOf("git apply --verbose --reject")).toBeLessThan(s.indexOf("patch --batch --fuzz=5 -p1 -i"));
  });

  it("test directives and the files a test patch modifies or creates", () => {
    const tp = diff("tests/format_tests/tests.py") + `diff --git a/tests/new/test_x.py b/tests/new/test_x.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/new/test_x.py\n@@ -0,0 +1 @@\n+x\n` + diff("tests/data.json");
    expect(testDirectives(tp, "pytest")).toEqual(["tests/format_tests/tests.py", "tests/new/test_x.py"]);
    expect(testDirectives(tp, "django")).toEqual(["format_tests.tests", "new.test_x"]);
    expect(splitModifiedNew(tp)).toEqual({ modified: ["tests/format_tests/tests.py", "tests/data.json"], created: ["tests/new/test_x.py"] });
    expect(repoSpec("django/django").parser).toBe("django");
    expect(repoSpec("sympy/sympy").testCmd).toContain("bin/test -C --verbose");
    expect(repoSpec("someone/else")).toEqual({ parser: "pytest", testCmd: "pytest --no-header -rA --tb=no -p no:cacheprovider" });
  });

  it("instances: JSON-encoded test lists decoded; a missing or malformed field is named", () => {
    const inst = JSON.parse(readFileSync("config/swe/textkit/instance.json", "utf8"));
    const parsed = SweInstance.parse(inst);
    expect(parsed.FAIL_TO_PASS).toEqual(["tests/test_slug.py::test_collapses_runs", "tests/test_slug.py::test_custom_separator_collapsed"]);
    expect(parsed.PASS_TO_PASS).toHaveLength(4);
    const { FAIL_TO_PASS: _, ...missing } = inst;
    const reg = createEvaluatorRegistry();
    expect(() => reg.check({ strategy: "swebench_harness", config: { instance: missing } })).toThrow(/config\.instance\.FAIL_TO_PASS/);
    expect(() => reg.check({ strategy: "swebench_harness", config: { instance: { ...inst, PASS_TO_PASS: "[not json" } } })).toThrow(/config\.instance\.PASS_TO_PASS: not a JSON-encoded list/);
    expect(() => reg.check({ strategy: "swebench_harness", config: { instance: { ...inst, FAIL_TO_PASS: "[]" } } })).toThrow(/FAIL_TO_PASS: no FAIL_TO_PASS test/);
    expect(instanceImageName("django__django-11099")).toBe("sweb.eval.x86_64.django_1776_django-11099:latest");
    expect(instanceImageName("polar-swe__textkit-1")).toBe("sweb.eval.x86_64.polar-swe_1776_textkit-1:latest");
    expect(reg.names()).toEqual(expect.arrayContaining(["command", "harbor", "session_completed", "swebench_harness", "test_on_output"]));
  });

  it("config/swe's instance files are what their sources generate", () => {
    const out = execFileSync("node", ["scripts/swe-instances.mjs", "--check"], { encoding: "utf8" });
    expect(out).toMatch(/4 instances checked/);
  });
});
