/**
 * Per-repository defaults from SWE-bench's spec tables
 * (swebench/harness/constants, test_spec/python.py): the test command, the
 * log parser, and how test files in the test patch become test directives.
 */
export const START_TEST_OUTPUT = ">>>>> Start Test Output";
export const END_TEST_OUTPUT = ">>>>> End Test Output";

export const TEST_PYTEST = "pytest --no-header -rA --tb=no -p no:cacheprovider";
export const TEST_DJANGO = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1";
export const TEST_SYMPY = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose";
export const TEST_SPHINX = "tox --current-env -epy39 -v --";
export const TEST_ASTROPY = "pytest -rA -vv -o console_output_style=classic --tb=no";

interface RepoSpec {
  parser: string;
  testCmd: string;
}

const REPOS: Record<string, RepoSpec> = {
  "astropy/astropy": { parser: "pytest_v2", testCmd: TEST_ASTROPY },
  "django/django": { parser: "django", testCmd: TEST_DJANGO },
  "marshmallow-code/marshmallow": { parser: "pytest", testCmd: TEST_PYTEST },
  "matplotlib/matplotlib": { parser: "pytest", testCmd: TEST_PYTEST },
  "mwaskom/seaborn": { parser: "pytest", testCmd: "pytest --no-header -rA" },
  "pallets/flask": { parser: "pytest", testCmd: TEST_PYTEST },
  "psf/requests": { parser: "pytest_options", testCmd: TEST_PYTEST },
  "pvlib/pvlib-python": { parser: "pytest", testCmd: TEST_PYTEST },
  "pydata/xarray": { parser: "pytest", testCmd: TEST_PYTEST },
  "pydicom/pydicom": { parser: "pytest_options", testCmd: TEST_PYTEST },
  "pylint-dev/astroid": { parser: "pytest", testCmd: TEST_PYTEST },
  "pylint-dev/pylint": { parser: "pytest_options", testCmd: TEST_PYTEST },
  "pytest-dev/pytest": { parser: "pytest", testCmd: "pytest -rA" },
  "pyvista/pyvista": { parser: "pytest", testCmd: TEST_PYTEST },
  "scikit-learn/scikit-learn": { parser: "pytest_v2", testCmd: TEST_PYTEST },
  "sqlfluff/sqlfluff": { parser: "pytest", testCmd: TEST_PYTEST },
  "sphinx-doc/sphinx": { parser: "pytest_v2", testCmd: TEST_SPHINX },
  "sympy/sympy": { parser: "sympy", testCmd: TEST_SYMPY },
};

/** The repository's defaults; any other repository runs pytest -rA. */
export function repoSpec(repo: string): RepoSpec {
  return REPOS[repo] ?? { parser: "pytest", testCmd: TEST_PYTEST };
}

const NON_TEST_EXTS = [".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml"];

/** The files a diff touches (its `b/` side). */
export function diffFiles(patch: string): string[] {
  return [...patch.matchAll(/^diff --git a\/.* b\/(.*)$/gm)].map((m) => m[1]!);
}

/** Files that exist before the diff (modified or deleted) and files it creates. */
export function splitModifiedNew(patch: string): { modified: string[]; created: string[] } {
  const modified: string[] = [];
  const created: string[] = [];
  for (const block of patch.split(/^(?=diff --git )/m)) {
    const head = /^diff --git a\/(.*) b\/(.*)$/m.exec(block);
    if (!head) continue;
    if (/^(new file mode|--- \/dev\/null)/m.test(block)) created.push(head[2]!);
    else modified.push(head[1]!);
  }
  return { modified, created };
}

function isDjangoTestFile(path: string): boolean {
  const name = path.split("/").at(-1)!;
  return name === "tests.py" || name.startsWith("test_") || path.includes("/tests/") || path.includes("/test_");
}

/**
 * What the test command is given: the test patch's files without data files;
 * for Django-style runners, dotted module labels relative to tests/.
 */
export function testDirectives(testPatch: string, parser: string): string[] {
  const files = diffFiles(testPatch).filter((d) => !NON_TEST_EXTS.some((e) => d.endsWith(e)));
  if (parser !== "django") return files;
  return files
    .filter(isDjangoTestFile)
    .map((d) => (d.endsWith(".py") ? d.slice(0, -3) : d))
    .map((d) => (d.startsWith("tests/") ? d.slice("tests/".length) : d))
    .map((d) => d.replaceAll("/", "."));
}
