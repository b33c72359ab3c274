/**
 * File transfer for sandboxes whose files live on the host (local, apptainer):
 * copies keep modes and symlinks; writes are confined to the session directory
 * so a task can never make the gateway write elsewhere on the host.
 */
import { chmod, cp, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve } from "node:path";
import { runtimeError } from "./common.ts";

/** Resolves a sandbox path (relative ones against `workdir`) to a host path. */
export function hostPath(workdir: string, p: string): string {
  return isAbsolute(p) ? resolve(p) : resolve(workdir, p);
}

export function assertInside(root: string, p: string, what: string): void {
  const rel = relative(root, p);
  if (rel.startsWith("..") || isAbsolute(rel)) throw runtimeError(`${what} ${p} is outside the sandbox's writable area ${root}`);
}

/** Copies a file or a directory tree from `src` to `dst` (dst is the new name), modes kept. */
export async function copyPath(src: string, dst: string): Promise<void> {
  let st;
  try {
    st = await stat(src);
  } catch (e) {
    throw runtimeError(`cannot copy ${src}: it does not exist`, e);
  }
  await mkdir(dirname(dst), { recursive: true });
  try {
    await cp(src, dst, { recursive: true, force: true, verbatimSymlinks: true });
    if (st.isDirectory()) await chmod(dst, st.mode & 0o7777);
  } catch (e) {
    throw runtimeError(`cannot copy ${src} to ${dst}`, e);
  }
}

export async function writeHostFile(p: string, content: string | Uint8Array, mode?: number): Promise<void> {
  await mkdir(dirname(p), { recursive: true });
  await writeFile(p, content, mode === undefined ? undefined : { mode });
  if (mode !== undefined) await chmod(p, mode);
}

export async function readHostFile(p: string): Promise<Uint8Array> {
  try {
    return new Uint8Array(await readFile(p));
  } catch (e) {
    throw runtimeError(`cannot read ${p} from the sandbox`, e);
  }
}
