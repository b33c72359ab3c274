/**
 * Host files a task may copy into its sandbox (`upload_file`, `upload_dir`,
 * `agent.skills_path`): only from under the configured `upload_roots`, judged
 * after resolving symlinks, so `../` and a link planted in an allowed folder
 * cannot reach the rest of the host. Checked at submit (the supervisor) and
 * again where the copy happens (the gateway).
 */
import { existsSync, realpathSync } from "node:fs";
import { isAbsolute, relative, resolve, sep } from "node:path";
import { PolarError, ValidationError, type FieldIssue } from "../protocol/errors.ts";
import type { TaskRequest } from "../protocol/schemas.ts";
import { REPO_ROOT } from "../tools/paths.ts";

/** Default: polar's example files only (the quickstart's client). Operators add their own roots. */
export const DEFAULT_UPLOAD_ROOTS: readonly string[] = [resolve(REPO_ROOT, "config", "examples")];

/** The real path of `p` (relative to `base`), or of its deepest existing ancestor joined with the rest. */
export function realish(p: string, base = process.cwd()): string {
  let cur = resolve(base, p);
  const rest: string[] = [];
  while (!existsSync(cur)) {
    const parent = resolve(cur, "..");
    if (parent === cur) break;
    rest.unshift(cur.slice(parent.length + (parent.endsWith(sep) ? 0 : 1)));
    cur = parent;
  }
  try {
    return resolve(realpathSync(cur), ...rest);
  } catch {
    return resolve(cur, ...rest);
  }
}

function inside(root: string, p: string): boolean {
  const rel = relative(root, p);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/** Why `source` may not be uploaded, or undefined when it lies under one of `roots`. */
export function uploadRefusal(source: string, roots: readonly string[], base = process.cwd()): string | undefined {
  const real = realish(source, base);
  if (roots.some((r) => inside(realish(r, base), real))) return undefined;
  const shown = real === resolve(base, source) ? real : `${source} (resolves to ${real})`;
  return roots.length
    ? `host path ${shown} is outside the allowed upload roots (${roots.join(", ")})`
    : `host path ${shown} may not be uploaded: no upload roots are configured`;
}

/** Throws a `forbidden` PolarError naming the path unless it lies under `roots`. */
export function assertUploadAllowed(source: string, roots: readonly string[], what: string, base = process.cwd()): void {
  const why = uploadRefusal(source, roots, base);
  if (why) throw new PolarError("forbidden", `${what}: ${why}`, { details: { reason: "upload_outside_roots", path: source } });
}

/**
 * Every host path a task would copy, checked at submit. `skills_path` counts
 * when it exists on this host (otherwise it names a path inside the sandbox).
 */
export function checkTaskUploads(task: TaskRequest, roots: readonly string[], base = process.cwd()): void {
  const issues: FieldIssue[] = [];
  const rt = task.runtime;
  for (const [key, list] of [["prepare", rt?.prepare ?? []], ["eval_prepare", rt?.eval_prepare ?? []]] as const) {
    list.forEach((a, i) => {
      if (a.type === "exec" || !a.source) return;
      const why = uploadRefusal(a.source, roots, base);
      if (why) issues.push({ path: `runtime.${key}.${i}.source`, message: why });
    });
  }
  const skills = task.agent.skills_path;
  if (skills && existsSync(resolve(base, skills))) {
    const why = uploadRefusal(skills, roots, base);
    if (why) issues.push({ path: "agent.skills_path", message: why });
  }
  if (issues.length) throw new ValidationError("task", issues);
}
