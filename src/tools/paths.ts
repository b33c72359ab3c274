/**
 * Where the pinned harness CLIs live. The tools cache is one npm prefix:
 * `npm install --prefix <dir> <pkg>@<version> ...`, so every CLI binary is at
 * `<dir>/node_modules/.bin/<bin>`, and a copy of the Node binary that installed
 * them is at `<dir>/node/bin/node` (for sandboxes without Node of their own).
 */
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (two levels above this file). */
export const REPO_ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));

/** `$POLAR_TOOLS_DIR`, or `<repo root>/.polar/tools`. */
export function toolsDir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = env.POLAR_TOOLS_DIR;
  return dir ? resolve(dir) : join(REPO_ROOT, ".polar", "tools");
}

/** Directory of every installed CLI's entry point. */
export function toolsBinDir(dir: string = toolsDir()): string {
  return join(dir, "node_modules", ".bin");
}

/** Absolute path of one CLI binary in the cache (it may not exist). */
export function toolBin(name: string, dir: string = toolsDir()): string {
  return join(toolsBinDir(dir), name);
}

/** Directory holding the cached `node` binary. */
export function toolsNodeBinDir(dir: string = toolsDir()): string {
  return join(dir, "node", "bin");
}

/** The cached `node` binary (it may not exist). */
export function toolsNodeBin(dir: string = toolsDir()): string {
  return join(toolsNodeBinDir(dir), "node");
}

/** Installed package directory of `pkg` (scoped names included). */
export function toolPackageDir(pkg: string, dir: string = toolsDir()): string {
  return join(dir, "node_modules", ...pkg.split("/"));
}
