/**
 * The agent's patch: taken in the agent's runtime with `git diff`, without
 * build and cache debris, and applied in the evaluation runtime the way
 * SWE-bench's run_evaluation does (each command in turn until one succeeds).
 */
export const DEFAULT_PATCH_COMMAND = "git diff --binary --submodule=diff";

/** Paths that are never part of a patch (globs, matched against each file of the diff). */
export const ALWAYS_EXCLUDED = ["**/__pycache__/**", "**/*.pyc", "**/*.pyo", "**/.pytest_cache/**", "**/.mypy_cache/**", "**/.ruff_cache/**", "**/*.egg-info/**", "**/.tox/**", "**/.DS_Store"];

export const GIT_APPLY_CMDS = ["git apply --verbose", "git apply --verbose --reject", "patch --batch --fuzz=5 -p1 -i"];

/** A glob (`**`, `*`, `?`) as a RegExp over a relative path; a pattern without "/" matches at any depth. */
export function globRegExp(glob: string): RegExp {
  const g = glob.includes("/") ? glob.replace(/^\.?\//, "") : `**/${glob}`;
  let re = "";
  for (let i = 0; i < g.length; i++) {
    const c = g[i]!;
    if (c === "*" && g[i + 1] === "*") {
      const slash = g[i + 2] === "/";
      re += slash ? "(?:.*/)?" : ".*";
      i += slash ? 2 : 1;
    } else if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

/** Drops the diff blocks of files that match any pattern (also a directory pattern matching a prefix). */
export function filterPatch(patch: string, patterns: string[]): { patch: string; excluded: string[] } {
  const res = patterns.map(globRegExp);
  const excluded: string[] = [];
  const kept: string[] = [];
  const blocks = patch.split(/^(?=diff --git )/m);
  for (const block of blocks) {
    const head = /^diff --git a\/(.*) b\/(.*)$/m.exec(block);
    if (!head) {
      if (block.trim()) kept.push(block);
      continue;
    }
    const paths = [head[1]!, head[2]!];
    if (paths.some((p) => res.some((r) => r.test(p)))) excluded.push(head[2]!);
    else kept.push(block);
  }
  return { patch: kept.join(""), excluded };
}

const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * Shell that prints the patch: untracked files are marked intent-to-add so a
 * plain `git diff` shows them (ignored files stay out), then the command runs
 * against the base commit (only when it is the default command).
 */
export function extractScript(repoDir: string, command: string, baseCommit: string): string {
  const diff = command === DEFAULT_PATCH_COMMAND ? `${command} ${baseCommit}` : command;
  return [`cd ${q(repoDir)}`, "git add --intent-to-add --all . >/dev/null 2>&1 || true", diff].join(" && ");
}

/** Shell that applies the patch file with each command in turn; prints which one worked. */
export function applyScript(repoDir: string, patchFile: string): string {
  const tries = GIT_APPLY_CMDS.map((c) => `echo ${q(`+ ${c}`)}\nif ${c} ${q(patchFile)}; then echo ">>>>> Applied Patch (${c})"; exit 0; fi`);
  return [`cd ${q(repoDir)} || exit 2`, ...tries, `echo ">>>>> Patch Apply Failed"`, "exit 1"].join("\n");
}
