/**
 * Test-log parsers with SWE-bench's semantics (swebench/harness/log_parsers):
 * each turns the text between the start and end markers of a test run into a
 * map from test name to status. Names are what the runner prints, so they must
 * match the instance's FAIL_TO_PASS / PASS_TO_PASS lists exactly.
 */
export const TEST_STATUSES = ["FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL"] as const;
export type TestStatus = (typeof TEST_STATUSES)[number];
export type StatusMap = Map<string, TestStatus>;
export type LogParser = (log: string) => StatusMap;

const STATUS_ALT = TEST_STATUSES.join("|");
const STATUS_FIRST = new RegExp(`^(${STATUS_ALT})\\s+(\\S+)`);
const TEST_FIRST = new RegExp(`^(\\S+)\\s+(${STATUS_ALT})(?:\\s|$)`);
const SKIP_COUNT = /^\[\d+\]/;

/** One line of `pytest -rA` (`PASSED tests/x.py::t`, `FAILED tests/x.py::t - msg`) or of `-v` (`tests/x.py::t PASSED`). */
function pytestLine(line: string): [string, TestStatus] | null {
  const a = STATUS_FIRST.exec(line);
  if (a) {
    const status = a[1] as TestStatus;
    let name = a[2]!;
    if (status === "FAILED") name = line.replaceAll(" - ", " ").split(/\s+/)[1]!;
    if (status === "SKIPPED" && SKIP_COUNT.test(name)) return null;
    return [name, status];
  }
  const b = TEST_FIRST.exec(line);
  return b ? [b[1]!, b[2] as TestStatus] : null;
}

export function parsePytest(log: string): StatusMap {
  const m: StatusMap = new Map();
  for (const line of log.split("\n")) {
    const r = pytestLine(line);
    if (r) m.set(r[0], r[1]);
  }
  return m;
}

/** pytest with parametrized ids: an absolute-path option is shortened to its last component. */
export function parsePytestOptions(log: string): StatusMap {
  const m: StatusMap = new Map();
  for (const line of log.split("\n")) {
    const r = pytestLine(line);
    if (!r) continue;
    let name = r[0];
    const opt = /^(.*?)\[(.*)\]$/.exec(name);
    if (opt) {
      let option = opt[2]!;
      if (option.startsWith("/") && !option.startsWith("//") && !option.includes("*")) option = "/" + option.split("/").at(-1);
      name = `${opt[1]}[${option}]`;
    }
    m.set(name, r[1]);
  }
  return m;
}

/** Later pytest versions: ANSI colour codes and control characters stripped first. */
export function parsePytestV2(log: string): StatusMap {
  const m: StatusMap = new Map();
  for (let line of log.split("\n")) {
    line = line.replace(/\[(\d+)m/g, "").replace(/[\x01-\x1f]/g, "");
    const r = pytestLine(line);
    if (r) m.set(r[0], r[1]);
  }
  return m;
}

/** Django's test runner at --verbosity 2: `name (module.Class) ... ok|FAIL|ERROR|skipped '…'`. */
export function parseDjango(log: string): StatusMap {
  const m: StatusMap = new Map();
  let prev: string | null = null;
  for (const raw of log.split("\n")) {
    let line = raw.trim();
    if (line.includes("--version is equivalent to version")) m.set("--version is equivalent to version", "PASSED");
    if (line.includes(" ... ")) prev = line.split(" ... ")[0]!;
    for (const suffix of [" ... ok", " ... OK", " ...  OK"]) {
      if (!line.endsWith(suffix)) continue;
      if (line.startsWith("Applying sites.0002_alter_domain_unique...test_no_migrations")) line = line.split("...").slice(1).join("...").trim();
      m.set(line.slice(0, line.lastIndexOf(suffix)), "PASSED");
      break;
    }
    if (line.includes(" ... skipped")) m.set(line.split(" ... skipped")[0]!, "SKIPPED");
    if (line.endsWith(" ... FAIL")) m.set(line.split(" ... FAIL")[0]!, "FAILED");
    if (line.startsWith("FAIL:")) m.set(line.split(/\s+/)[1]!.trim(), "FAILED");
    if (line.endsWith(" ... ERROR")) m.set(line.split(" ... ERROR")[0]!, "ERROR");
    if (line.startsWith("ERROR:")) m.set(line.split(/\s+/)[1]!.trim(), "ERROR");
    // The verdict came on a later line, after output the test printed.
    if (line.startsWith("ok") && prev !== null) m.set(prev, "PASSED");
  }
  // A long print interrupting the last test's line: "name ... <message>\nok".
  const interrupted = [
    /^(.*?)\s\.\.\.\sTesting against Django installed in ([\s\S]*?) silenced\)\.\nok$/gm,
    /^(.*?)\s\.\.\.\sInternal Server Error: \/(.*)\/\nok$/gm,
    /^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$/gm,
  ];
  for (const re of interrupted) for (const match of log.matchAll(re)) m.set(match[1]!, "PASSED");
  return m;
}

/** SymPy's bin/test --verbose: `test_name ok|F|E`, failures also as `____ path.py:test_name ____` headers. */
export function parseSympy(log: string): StatusMap {
  const m: StatusMap = new Map();
  for (const match of log.matchAll(/(_*) (.*)\.py:(.*) (_*)/g)) m.set(`${match[2]}.py:${match[3]}`, "FAILED");
  for (const raw of log.split("\n")) {
    const line = raw.trim();
    if (!line.startsWith("test_")) continue;
    const name = line.split(/\s+/)[0]!;
    if (line.endsWith(" E")) m.set(name, "ERROR");
    if (line.endsWith(" F")) m.set(name, "FAILED");
    if (line.endsWith(" ok")) m.set(name, "PASSED");
  }
  return m;
}

/** Parsers by name (the instance's or config's `log_parser`). */
export const LOG_PARSERS: Record<string, LogParser> = {
  pytest: parsePytest,
  pytest_options: parsePytestOptions,
  pytest_v2: parsePytestV2,
  django: parseDjango,
  sympy: parseSympy,
};
